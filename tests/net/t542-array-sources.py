"""t542: tools/idx-to-arrays.py converts Fashion-MNIST to .npy (uint8 inputs)
and, when the build reads HDF5 and h5py is installed, to HDF5 (float32
inputs); then the C program t542-array-sources holds every sample of both
to the IDX files and trains LeNet-5 from each source, at 1 and 4 ranks.

Arguments: mpiexec, the t542-array-sources program, the Fashion-MNIST
directory, the converter, and "1" when the build reads HDF5.  Skipped (77)
without Fashion-MNIST or numpy."""
import os
import shutil
import subprocess
import sys
import tempfile

from train_cli import Checks, arguments


def main():
    mpiexec, program, data = arguments("t542", "fashion-mnist")
    converter, with_hdf5 = sys.argv[4], sys.argv[5] == "1"
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("t542: skipped: no numpy (sh tools/install-deps.sh installs python3-numpy)")
        return 77
    try:
        import h5py  # noqa: F401
    except ImportError:
        with_hdf5 = False
    checks = Checks("t542")
    work = tempfile.mkdtemp(prefix="adjoin-t542-")
    try:
        npy, h5 = os.path.join(work, "npy"), os.path.join(work, "h5")
        r = subprocess.run([sys.executable, converter, data, npy], capture_output=True, text=True)
        checks.check(r.returncode == 0, f"converting to .npy: {r.stdout}{r.stderr}")
        print(r.stdout, end="")
        if with_hdf5:
            r = subprocess.run([sys.executable, converter, "--format", "hdf5", "--inputs", "float32", data, h5],
                               capture_output=True, text=True)
            checks.check(r.returncode == 0, f"converting to HDF5: {r.stdout}{r.stderr}")
            print(r.stdout, end="")
        else:
            print("t542: HDF5 not in this build (or no h5py): .npy only")
        for ranks in (1, 4):
            r = subprocess.run([mpiexec, "-n", str(ranks), program, data, npy, h5 if with_hdf5 else "-"],
                               capture_output=True, text=True, timeout=900)
            print(r.stdout + r.stderr, end="")
            checks.check(r.returncode == 0, f"{ranks} ranks: exit {r.returncode}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
