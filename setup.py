# setuptools needs setup.py for cffi_modules; all metadata lives in pyproject.toml.
# build_py also copies the bundled sample captures (samples/*.pcap*) into ledgertool/data/
# so that `ledgertool demo` finds them in an installed package.
import runpy
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithSamples(build_py):
    def run(self):
        super().run()
        data = Path(self.build_lib) / "ledgertool" / "data"
        data.mkdir(parents=True, exist_ok=True)
        for p in sorted(Path(__file__).parent.joinpath("samples").glob("sample.pcap*")):
            shutil.copy2(p, data / p.name)


# The kernel-bypass source modules (AF_XDP, DPDK) are built where pkg-config finds their libraries.
OPTIONAL = runpy.run_path(str(Path(__file__).parent / "native" / "build_ffi.py"))[
    "OPTIONAL_BUILDERS"
]
setup(
    cffi_modules=[
        "native/build_ffi.py:ffibuilder",
        *(f"native/build_ffi.py:{b}" for b in OPTIONAL),
    ],
    cmdclass={"build_py": BuildPyWithSamples},
)
