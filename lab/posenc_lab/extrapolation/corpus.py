"""The real-text corpus: the reStructuredText sources of Python 3.11's documentation.

Debian's ``python3.11-doc`` package ships them as
``/usr/share/doc/python3.11/html/_sources/**/*.rst.txt``: English prose
with code, identical for anyone who installs the same version of the
package, offline once it is installed. The corpus is those files' bytes
(a byte-level model: 256 token ids), pinned by version and SHA-256:

- the documents are the ``*.rst.txt`` files under :data:`SOURCES`, in the
  byte order of their relative paths;
- the corpus's SHA-256 is that of the ``sha256sum`` listing of those files
  in that order (``<hex>  <path>`` lines), so a shell checks it too::

      cd /usr/share/doc/python3.11/html/_sources &&
      find . -type f -name '*.rst.txt' -printf '%P\\n' | LC_ALL=C sort |
      xargs sha256sum | sha256sum

- a document goes to validation when the first 8 hex digits of the SHA-256
  of its path, read as an integer, are divisible by 10
  (:func:`is_validation`): a split by document that does not depend on the
  contents or on which other files exist;
- each split is its documents in order, each followed by the byte 0 (which
  no document contains), as one stream of token ids.

Other versions of the package differ: 3.11.2-6+deb12u8 (Debian 12's main
archive) differs from the pinned 3.11.2-6+deb12u9 (its security archive) in
four files (``library/asyncio-eventloop``, ``asyncio-stream``, ``ssl`` and
``urllib.request``), so :func:`load_corpus` checks the hash and names the
package and version it needs when the files are missing or differ.

``python -m posenc_lab.extrapolation.corpus`` prints the facts and exits
non-zero with that message (``make corpus`` runs it after installing the
package).
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "DOCUMENTS",
    "PACKAGE",
    "SHA256",
    "SOURCES",
    "TOTAL_BYTES",
    "VERSION",
    "Corpus",
    "CorpusError",
    "build_corpus",
    "is_validation",
    "load_corpus",
    "manifest",
]

#: The Debian package and the version whose files make the pinned corpus.
PACKAGE = "python3.11-doc"
VERSION = "3.11.2-6+deb12u9"
#: Where the package puts the documentation's sources.
SOURCES = Path("/usr/share/doc/python3.11/html/_sources")
#: The documents: every file under :data:`SOURCES` with this name pattern.
PATTERN = "*.rst.txt"
#: The pinned corpus: its SHA-256 (see the module's docstring), documents, bytes.
SHA256 = "04fc8c39fa89cdd40a5e2ffab5ae3ff951a6f2484a85aafb694724646fb6bd91"
DOCUMENTS = 497
TOTAL_BYTES = 11_048_275
#: One document in this many (by the hash of its path) goes to validation.
VALIDATION_EVERY = 10
#: The token between documents (no document contains the byte 0).
SEPARATOR = 0


class CorpusError(RuntimeError):
    """The corpus is missing or is not the pinned one."""


@dataclass(frozen=True)
class Corpus:
    """The two splits as streams of byte ids, and what identifies them.

    Attributes:
        train (torch.Tensor): ``uint8 [n_train]``, the training documents.
        validation (torch.Tensor): ``uint8 [n_validation]``.
        sha256 (str): the corpus's SHA-256 (of its ``sha256sum`` listing).
        documents (int): number of documents.
        validation_documents (int): of which in validation.
        total_bytes (int): bytes in all documents (separators not counted).
    """

    train: torch.Tensor
    validation: torch.Tensor
    sha256: str
    documents: int
    validation_documents: int
    total_bytes: int

    def describe(self) -> dict:
        """What a record stores about the corpus (JSON-ready)."""
        return {
            "package": PACKAGE,
            "version": VERSION,
            "sources": str(SOURCES),
            "sha256": self.sha256,
            "documents": self.documents,
            "validation_documents": self.validation_documents,
            "bytes": self.total_bytes,
            "train_tokens": len(self.train),
            "validation_tokens": len(self.validation),
        }


def is_validation(path: str) -> bool:
    """Whether the document at relative ``path`` (``"library/os.rst.txt"``) is in validation."""
    digest = hashlib.sha256(path.encode()).hexdigest()
    return int(digest[:8], 16) % VALIDATION_EVERY == 0


def manifest(root: str | Path) -> list[tuple[str, str]]:
    """``(sha256 hex, relative path)`` of every document under ``root``, in path order."""
    root = Path(root)
    found = (p.relative_to(root).as_posix() for p in root.rglob(PATTERN) if p.is_file())
    paths = sorted(found, key=str.encode)  # byte order, as LC_ALL=C sort
    return [(hashlib.sha256((root / p).read_bytes()).hexdigest(), p) for p in paths]


def _listing_sha256(entries: list[tuple[str, str]]) -> str:
    listing = "".join(f"{digest}  {path}\n" for digest, path in entries)
    return hashlib.sha256(listing.encode()).hexdigest()


def build_corpus(root: str | Path) -> Corpus:
    """The corpus made of the documents under ``root``, whatever they are (no pin checked).

    Raises:
        CorpusError: if ``root`` holds no document, one contains the
            separator, or a split is empty.
    """
    root = Path(root)
    entries = manifest(root)
    if not entries:
        raise CorpusError(f"no {PATTERN} document under {root}")
    splits: dict[bool, list[bytes]] = {False: [], True: []}
    total = 0
    for _, path in entries:
        data = (root / path).read_bytes()
        if bytes([SEPARATOR]) in data:
            raise CorpusError(f"{root / path} contains the separator byte {SEPARATOR}")
        splits[is_validation(path)].append(data + bytes([SEPARATOR]))
        total += len(data)

    if not splits[True] or not splits[False]:
        raise CorpusError(f"the {len(entries)} documents under {root} leave a split empty")

    def stream(parts: list[bytes]) -> torch.Tensor:
        return torch.frombuffer(bytearray(b"".join(parts)), dtype=torch.uint8)

    return Corpus(
        train=stream(splits[False]),
        validation=stream(splits[True]),
        sha256=_listing_sha256(entries),
        documents=len(entries),
        validation_documents=len(splits[True]),
        total_bytes=total,
    )


def installed_version() -> str | None:
    """The version of :data:`PACKAGE` that dpkg reports installed, or ``None``."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Status}\t${Version}", PACKAGE],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    except OSError:  # no dpkg: not a Debian system
        return None
    status, _, version = out.partition("\t")
    return version if status.endswith(" installed") else None


_INSTALL = f"sudo apt-get install {PACKAGE}={VERSION} (or `make corpus`)"


@functools.lru_cache(maxsize=1)
def load_corpus(root: str | Path = SOURCES) -> Corpus:
    """The pinned corpus, built from ``root`` and checked against :data:`SHA256`.

    Raises:
        CorpusError: naming the package and the version needed, if ``root``
            holds no document or the documents are not the pinned ones.
    """
    root = Path(root)
    if not root.is_dir() or not any(root.rglob(PATTERN)):
        raise CorpusError(
            f"the real-text corpus is missing: no {PATTERN} under {root}. It is the "
            f"documentation sources of Debian's {PACKAGE} {VERSION}; install it with: {_INSTALL}"
        )
    corpus = build_corpus(root)
    if corpus.sha256 != SHA256:
        raise CorpusError(
            f"the corpus under {root} is not the pinned one: SHA-256 {corpus.sha256}, "
            f"{corpus.documents} documents, {corpus.total_bytes} bytes; the experiment "
            f"needs {SHA256} ({DOCUMENTS} documents, {TOTAL_BYTES} bytes), from Debian's "
            f"{PACKAGE} {VERSION} (installed: {installed_version() or 'none found'}). "
            f"Install that version with: {_INSTALL}"
        )
    return corpus


def main() -> int:
    try:
        corpus = load_corpus()
    except CorpusError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for key, value in corpus.describe().items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
