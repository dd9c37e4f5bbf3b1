"""The kernels' machine code, compiled when a wheel is built (ort_ext/machine_code/aot.py): pyproject.toml holds
the rest.

On Linux x86-64 and aarch64 the wheel carries one library per level of the architecture (machine_code.LEVELS, or
the ones LOSSOPS_WHEEL_LEVELS names) and is a platform wheel; LOSSOPS_WHEEL_ARCH=aarch64 builds the aarch64 wheel
on x86-64 (a cross C compiler, library.compiler). Elsewhere, or with LOSSOPS_AOT=0, it is pure Python and the
kernels need `lossops[jit]`.
Editable installs compile nothing here: numba compiles the kernels when first used.
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

from build_backend import prebuilt, wheel_arch, wheel_levels


class BuildWithKernels(build_py):
    def find_package_modules(self, package, package_dir):
        # the repository root is the package `lossops`: the build's own scripts sit among its modules but are not
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if not (package == "lossops" and m[1] in ("setup", "build_backend"))]

    def run(self):
        super().run()
        if self.editable_mode or not prebuilt():
            return
        build_lib = Path(self.build_lib).resolve()  # the built package: its sources are what gets stamped
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(build_lib), os.environ.get("PYTHONPATH", "")]))
        subprocess.run([sys.executable, "-m", "lossops.ort_ext.machine_code.aot",
                        str(build_lib / "lossops/ort_ext/machine_code/prebuilt"), "--arch", wheel_arch(),
                        *(["--levels", *wheel_levels()] if wheel_levels() else [])],
                       env=env, check=True, cwd=build_lib)


class WithMachineCode(Distribution):
    def has_ext_modules(self):  # the libraries are not setuptools extensions, but install like them (platlib)
        return prebuilt()


class PlatformWheel(bdist_wheel):
    def get_tag(self):  # no Python C API in the libraries: any CPython 3 on the platform
        python, abi, plat = super().get_tag()
        if not prebuilt():
            return python, abi, plat
        return "py3", "none", plat if plat.endswith(wheel_arch()) else f"linux_{wheel_arch()}"


setup(distclass=WithMachineCode, cmdclass={"build_py": BuildWithKernels, "bdist_wheel": PlatformWheel})
