# setuptools needs setup.py for cffi_modules; all metadata lives in pyproject.toml.
# build_py also copies the bundled sample captures (samples/*.pcap*) into ledgertool/data/
# so that `ledgertool demo` finds them in an installed package.
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


setup(cffi_modules=["native/build_ffi.py:ffibuilder"], cmdclass={"build_py": BuildPyWithSamples})
