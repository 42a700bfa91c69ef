"""Seals, checkpoints, rotation and prune statements and proofs are read as dicts only by their
parsers: everywhere else the library reads the typed values the parsers build (seal.document.Seal,
seal.checkpoint.Checkpoint, seal.rotation.RotationStatement, seal.prune.PruneStatement,
verify.proofdoc's proofs). Read from the source with ast, so a dict read that comes back fails
here rather than in review.

A read is a string subscript (`doc["merkle_root"]`) or a `.get("...")` call on
- a value named as one of these documents (`doc`, `seal`, `cp`, `statement`, ...) with a key that is
  one of their members, or
- a member of a typed document that holds an object as stated (`st.doc.get("signatures")`,
  `doc.signatures.get("old")`, `rotation.new_signer["keys"]`): the typed value says it instead.
Writing a document being built (`doc["signatures"] = ...`) is not a read.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap

import python_source
from conftest import REPO

from ledgertool.seal.checkpoint import Checkpoint
from ledgertool.seal.document import Seal
from ledgertool.seal.prune import PrunedLink, PruneStatement
from ledgertool.seal.rotation import RotationStatement
from ledgertool.verify.proofdoc import CheckpointPart, InclusionProof, WindowProof

PKG = REPO / "ledgertool"

#: The typed documents whose members a dict read must not reach outside the parsers.
TYPED = (Seal, RotationStatement, PruneStatement, PrunedLink, Checkpoint)
PROOFS = (InclusionProof, WindowProof, CheckpointPart)

#: Member names of the documents as JSON spells them: the typed values' fields, the names a
#: checkpoint's JSON and text give its size, root and last seal, and a rotation's signers.
MEMBERS = (
    {f.name for cls in TYPED + PROOFS for f in dataclasses.fields(cls)}
    | {"tree_size", "root_hash", "last_seal", "last-seal", "old", "new", "signing", "keys"}
) - {"members", "_document", "doc", "path"}

#: Names the library gives a value holding one of the documents.
DOCUMENT_NAMES = {
    "doc",
    "seal",
    "seal_doc",
    "sdoc",
    "statement",
    "st",
    "stmt",
    "rotation",
    "rot",
    "prune",
    "cp",
    "checkpoint",
    "proof",
    "sigs",
    "signatures",
    "body",
}

#: Members of the typed documents that hold what the document stated (a JSON object or the
#: document itself): subscripting one reads the document around its type.
STATED = {"doc", "signatures", "signer", "source", "old_keys", "new_keys", "signing_keys"} | {
    "new_signer",
    "authoriser",
}

#: The parsers: where a document is a dict on its way to its typed value (module::function).
#: Functions named parse_* / _parse_* are parsers wherever they are.
PARSERS = {
    "canonical.py::loads_format_object",  # the `format` member of any strict JSON document
    "verify/proofdoc.py::proof_from_json",
    "verify/proofdoc.py::_checkpoint",
    "verify/proofdoc.py::_seal",
}

#: Parsers of other documents whose member names happen to coincide (not seals, checkpoints,
#: rotation or prune statements, proofs).
OTHER_DOCUMENTS = {
    "ledger/header.py::_header_fields",  # the ledger header (ledger.json)
    "ledger/header.py::_tier_fields",
    "ledger/header.py::_window_params",
    "ledger/devstate.py::load",  # a signing key's protected state
    "ledger/devstate.py::from_json",
    "keyfiles.py::_sniff",  # key files
    "keyfiles.py::from_dict",  # a verifier key set
    "cli/workload.py::bench",  # the generator benchmark's report
}


def _receiver(node: ast.expr) -> tuple[str | None, bool]:
    """(the name a read's receiver goes by, whether it is an attribute)."""
    if isinstance(node, ast.Name):
        return node.id, False
    if isinstance(node, ast.Attribute):
        return node.attr, True
    return None, False


def _read(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(receiver, key) of a string subscript read or a .get("key") call, else None."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.value, node.slice.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.func.value, node.args[0].value
    return None


def document_reads(source: str, rel: str) -> list[str]:
    """The dict reads of documents in one module's source, outside the parsers."""
    found: list[str] = []

    def visit(node: ast.AST, fn: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fn = node.name
        got = _read(node)
        where = f"{rel}::{fn}"
        if (
            got is not None
            and not fn.lstrip("_").startswith("parse")
            and where not in PARSERS | OTHER_DOCUMENTS
        ):
            (name, attribute), key = _receiver(got[0]), got[1]
            if (name in DOCUMENT_NAMES and key in MEMBERS) or (attribute and name in STATED):
                found.append(f"{rel}:{node.lineno} {fn}: {name}[{key!r}]")
        for child in ast.iter_child_nodes(node):
            visit(child, fn)

    visit(python_source.parse(source), "")
    return found


def test_no_dict_reads_of_documents_outside_their_parsers() -> None:
    found = [
        hit
        for path in sorted(PKG.rglob("*.py"))
        for hit in document_reads(path.read_text(), str(path.relative_to(PKG)))
    ]
    assert found == [], "read the typed value instead:\n" + "\n".join(found)


def test_the_scan_finds_dict_reads_and_passes_other_dicts() -> None:
    flagged = textwrap.dedent(
        """
        def check(seal, st, doc, cp, last):
            a = seal["merkle_root"]
            b = st.doc.get("signatures")
            c = doc.signatures.get("old")
            d = cp.get("tree_size")
            e = last.new_signer["keys"]
            f = doc.get("number")
        """
    )
    assert [h.split(" ", 1)[1] for h in document_reads(flagged, "verify/x.py")] == [
        "check: seal['merkle_root']",
        "check: doc['signatures']",
        "check: signatures['old']",
        "check: cp['tree_size']",
        "check: new_signer['keys']",
        "check: doc['number']",
    ]
    passed = textwrap.dedent(
        """
        def parse_thing(doc):
            return doc["merkle_root"], doc.get("signatures")

        def report(res, info, doc, live):
            doc["signatures"] = sign(doc)
            return res.get("notes"), info["type"], doc.get("per_window"), live["xdp"]
        """
    )
    assert document_reads(passed, "verify/x.py") == []
    assert document_reads("def f(doc):\n    return doc['seal']\n", "verify/proofdoc.py") != []
