"""OCI image layers, manifests and archives written from folders, without Docker.

A layer is a tar of a folder, written deterministically: entries sorted by name, owner 0:0,
every mtime :data:`EPOCH`, gzip with no name and a zero mtime; the same folder gives the same
digest. Layers live in a content-addressed blob store (``blobs/sha256/<hex>``) so images
share them. An archive is a tar of an OCI image layout (``oci-layout``, ``index.json``,
``blobs/``): ``ctr -n k8s.io images import``, ``kind load image-archive`` and ``docker load``
(25+) read it. The index names the image by its full reference
(``io.containerd.image.name``), which is what containerd and its CRI look images up by.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

EPOCH = 0  # every file's mtime in a layer, and the images' creation time
GZIP_LEVEL = 6
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
ANN_NAME = "io.containerd.image.name"
ANN_REF = "org.opencontainers.image.ref.name"


@dataclass(frozen=True, slots=True)
class Layer:
    digest: str  # sha256:<hex> of the gzip blob
    diff_id: str  # sha256:<hex> of the uncompressed tar
    size: int  # bytes of the gzip blob
    unpacked: int  # bytes of the files in it
    comment: str  # what it holds, for the image's history

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "diff_id": self.diff_id, "size": self.size, "unpacked": self.unpacked,
                "comment": self.comment}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Layer:
        return Layer(str(data["digest"]), str(data["diff_id"]), int(data["size"]), int(data["unpacked"]),
                     str(data["comment"]))


def normalize_ref(ref: str) -> str:
    """A reference as containerd and the CRI name it: ``busybox:1`` -> ``docker.io/library/busybox:1``."""
    name, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    first, _, rest = name.partition("/")
    if not rest:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    return f"{name}:{tag}"


class _Hashing(io.RawIOBase):
    """A write-only stream that counts and hashes what passes through to ``sink`` (if any)."""

    def __init__(self, sink: BinaryIO | None) -> None:
        self.sink, self.sha, self.count = sink, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.count

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.sha.update(view)
        self.count += len(view)
        if self.sink is not None:
            self.sink.write(view)
        return len(view)


def _sorted_entries(root: Path) -> list[tuple[str, Path]]:
    """(name in the tar, path) for everything under ``root``, parents before children, sorted.
    Symlinks to folders are entries, not followed."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            out.append((name if rel == "." else f"{rel}/{name}", Path(dirpath, name)))
    return sorted(out, key=lambda e: e[0].split("/"))


def write_layer(root: Path, blobs: Path, comment: str) -> Layer:
    """Tar and gzip the folder ``root`` into the blob store ``blobs``; returns its descriptor."""
    blobs.mkdir(parents=True, exist_ok=True)
    tmp = blobs / f".layer-{os.getpid()}.tmp"
    unpacked = 0
    with open(tmp, "wb") as out:
        compressed = _Hashing(out)
        with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, compresslevel=GZIP_LEVEL, mtime=EPOCH) as gz:
            plain = _Hashing(gz)  # type: ignore[arg-type]
            with tarfile.open(fileobj=plain, mode="w", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                seen: dict[tuple[int, int], str] = {}
                for name, path in _sorted_entries(root):
                    unpacked += _add(tar, name, path, seen)
    digest = "sha256:" + compressed.sha.hexdigest()
    tmp.replace(blobs / digest.split(":")[1])
    return Layer(digest, "sha256:" + plain.sha.hexdigest(), compressed.count, unpacked, comment)


def _add(tar: tarfile.TarFile, name: str, path: Path, seen: dict[tuple[int, int], str]) -> int:
    st = path.lstat()
    info = tarfile.TarInfo(name)
    info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "", ""
    # modes normalised (the builder's umask must not change a digest): folders 755 (and the
    # sticky bit), files 755 when executable else 644
    mode = stat.S_IMODE(st.st_mode)
    info.mode = 0o755 if mode & stat.S_IXUSR else 0o644
    if stat.S_ISLNK(st.st_mode):
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.readlink(path), 0o777
        tar.addfile(info)
        return 0
    if stat.S_ISDIR(st.st_mode):
        info.type, info.mode = tarfile.DIRTYPE, 0o1777 if mode & stat.S_ISVTX else 0o755
        tar.addfile(info)
        return 0
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path}: only files, folders and symlinks go into an image layer")
    key = (st.st_dev, st.st_ino)
    if st.st_nlink > 1 and key in seen:
        info.type, info.linkname = tarfile.LNKTYPE, seen[key]
        tar.addfile(info)
        return 0
    seen[key] = name
    info.size = st.st_size
    with open(path, "rb") as f:
        tar.addfile(info, f)
    return st.st_size


def _json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _descriptor(media: str, data: bytes, **extra: Any) -> dict[str, Any]:
    return {"mediaType": media, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data), **extra}


@dataclass(frozen=True, slots=True)
class Image:
    """One image: its full reference, platform, layers (bottom first) and runtime config."""

    ref: str
    arch: str
    layers: tuple[Layer, ...]
    config: Mapping[str, Any]  # the "config" member: Env, Entrypoint, Cmd, User, WorkingDir, Labels
    annotations: Mapping[str, str]

    def config_blob(self) -> bytes:
        return _json({
            "architecture": self.arch, "os": "linux", "created": "1970-01-01T00:00:00Z",
            "config": dict(self.config),
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in self.layers]},
            "history": [{"created": "1970-01-01T00:00:00Z", "created_by": f"drakit image build: {layer.comment}"}
                        for layer in self.layers],
        })

    def manifest_blob(self) -> bytes:
        return _json({
            "schemaVersion": 2, "mediaType": MEDIA_MANIFEST,
            "config": _descriptor(MEDIA_CONFIG, self.config_blob()),
            "layers": [{"mediaType": MEDIA_LAYER, "digest": layer.digest, "size": layer.size} for layer in self.layers],
            "annotations": dict(self.annotations),
        })

    def index_blob(self) -> bytes:
        full = normalize_ref(self.ref)
        desc = _descriptor(MEDIA_MANIFEST, self.manifest_blob(), platform={"architecture": self.arch, "os": "linux"},
                           annotations={ANN_NAME: full, ANN_REF: full.rsplit(":", 1)[1]})
        return _json({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": [desc]})

    @property
    def digest(self) -> str:
        """The manifest's digest: what a registry and containerd call the image."""
        return "sha256:" + hashlib.sha256(self.manifest_blob()).hexdigest()

    @property
    def unpacked(self) -> int:
        return sum(layer.unpacked for layer in self.layers)

    @property
    def compressed(self) -> int:
        return sum(layer.size for layer in self.layers)


def write_archive(image: Image, blobs: Path, dest: Path) -> None:
    """Write ``image`` as a tar of an OCI layout to ``dest`` (atomically), layers from ``blobs``."""
    small = [image.config_blob(), image.manifest_blob()]
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            _add_bytes(tar, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
            _add_bytes(tar, "index.json", image.index_blob())
            _add_bytes(tar, "blobs", None)
            _add_bytes(tar, "blobs/sha256", None)
            done: set[str] = set()
            for data in small:
                hexd = hashlib.sha256(data).hexdigest()
                _add_bytes(tar, f"blobs/sha256/{hexd}", data)
            for layer in image.layers:
                hexd = layer.digest.split(":")[1]
                if hexd in done:
                    continue
                done.add(hexd)
                path = blobs / hexd
                info = tarfile.TarInfo(f"blobs/sha256/{hexd}")
                info.size, info.mtime, info.mode = path.stat().st_size, EPOCH, 0o644
                with open(path, "rb") as f:
                    tar.addfile(info, f)
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes | None) -> None:
    info = tarfile.TarInfo(name)
    info.mtime = EPOCH
    if data is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        return
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def read_archive(path: Path) -> dict[str, Any]:
    """What an archive holds, read back as a consumer would: {ref, digest, config, layers} (for tests
    and ``drakit image build``'s summary). Raises ``ValueError`` when it is no OCI archive of one image."""
    with tarfile.open(path) as tar:
        members = {m.name: m for m in tar.getmembers()}

        def blob(name: str) -> bytes:
            f = tar.extractfile(members[name]) if name in members else None
            if f is None:
                raise ValueError(f"{path}: no {name} in the archive")
            return f.read()

        if json.loads(blob("oci-layout")).get("imageLayoutVersion") != "1.0.0":
            raise ValueError(f"{path}: not an OCI image layout 1.0.0")
        index = json.loads(blob("index.json"))
        descs: Sequence[Mapping[str, Any]] = index.get("manifests") or []
        if len(descs) != 1:
            raise ValueError(f"{path}: expected one image in index.json, found {len(descs)}")
        desc = descs[0]
        manifest_data = blob("blobs/sha256/" + desc["digest"].split(":")[1])
        if "sha256:" + hashlib.sha256(manifest_data).hexdigest() != desc["digest"]:
            raise ValueError(f"{path}: manifest digest does not match index.json")
        manifest = json.loads(manifest_data)
        config = json.loads(blob("blobs/sha256/" + manifest["config"]["digest"].split(":")[1]))
        return {"ref": desc["annotations"][ANN_NAME], "digest": desc["digest"], "config": config,
                "manifest": manifest, "members": sorted(members)}


def archive_refs(path: Path, *, max_json: int = 1 << 20) -> list[str]:
    """The image references an archive a user gives names (OCI layout: its index's
    ``io.containerd.image.name`` or ref annotations; ``docker save``: its RepoTags), to check the
    archive before a node imports it. Raises ``ValueError`` (one line) when it is no image archive."""
    try:
        with tarfile.open(path) as tar:
            found: dict[str, Any] = {}
            for member in tar:
                name = member.name.lstrip("./") if member.name not in (".", "./") else ""
                if name in ("index.json", "manifest.json") and member.isfile():
                    if member.size > max_json:
                        raise ValueError(f"{path}: its {name} is over {max_json} bytes")
                    f = tar.extractfile(member)
                    found[name] = json.loads(f.read()) if f is not None else None
                if "index.json" in found:
                    break
    except tarfile.TarError:
        raise ValueError(f"{path}: not an image archive (no tar file, plain or compressed)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not an image archive ({' '.join(str(exc).split())})") from None
    if isinstance(found.get("index.json"), dict):
        refs = [str((d.get("annotations") or {}).get(ANN_NAME) or (d.get("annotations") or {}).get(ANN_REF) or "")
                for d in found["index.json"].get("manifests") or [] if isinstance(d, dict)]
    elif isinstance(found.get("manifest.json"), list):
        refs = [str(t) for m in found["manifest.json"] if isinstance(m, dict) for t in m.get("RepoTags") or []]
    else:
        raise ValueError(f"{path}: not an image archive (no index.json of an OCI layout, no manifest.json of docker save)")
    named = [r for r in refs if r]
    if not named:
        raise ValueError(f"{path}: the archive names no image (no reference annotation or RepoTags): "
                         f"a pod could not refer to it")
    return named
