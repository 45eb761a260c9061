"""Your own container image per site (``emulation.runtime: docker``, or another node runtime whose entry
takes images, :mod:`testbed.node_kinds`): where it comes from.

    emulation:
      runtime: docker
      nodes: agents
      image: {dockerfile: image/Dockerfile}          # every site (built locally; context: its folder)
      site_images:
        b: {tar: b-image.tar, tag: my-b}              # site b: `docker save` output (loaded) or a rootfs tar (imported)

Paths are relative to the scenario file. Without either field the sites run the testbed's base
image (``testbed-base``); a Dockerfile may start ``FROM testbed-base``. The build, its cache and
the checks that an image can run the node agent are :mod:`testbed.runtime.user_image`'s.
"""

from __future__ import annotations

import os
import re
import tarfile
from pathlib import Path

from pydantic import Field, model_validator

from testbed.node_kinds import NODE_RUNTIMES
from testbed.spec.base import Strict

_HEX64 = re.compile(r"^[0-9a-f]{64}(/|\.json$|$)")
_ROOTFS_TOP = {"bin", "etc", "usr", "lib", "sbin", "var", "opt", "root"}
_IMAGE_NAMES = {"manifest.json", "index.json", "oci-layout", "repositories"}
TAG_PATTERN = r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$"


class ImageSource(Strict):
    dockerfile: str | None = Field(None, min_length=1, description=(
        "A Dockerfile, relative to the scenario file; its folder is the build context. Built by the run's "
        "private engine, again only when a file of that folder changes."))
    tar: str | None = Field(None, min_length=1, description=(
        "A local image tar, relative to the scenario file: `docker save` output (docker load) or a root file "
        "system tar (docker import); loaded again only when its content changes."))
    tag: str | None = Field(None, max_length=100, pattern=TAG_PATTERN, description=(
        "Image name (lower case, no ':'); tagged NAME:<content hash>. Default: testbed-user-<folder or file name>."))

    @model_validator(mode="after")
    def _one_of(self) -> "ImageSource":
        if (self.dockerfile is None) == (self.tar is None):
            raise ValueError("give 'dockerfile' or 'tar', one of them")
        return self

    @property
    def path(self) -> Path:
        return Path(self.dockerfile if self.dockerfile is not None else self.tar)  # type: ignore[arg-type]

    def describe(self) -> str:
        return f"dockerfile {self.dockerfile}" if self.dockerfile is not None else f"tar {self.tar}"


def resolve_image_paths(data: object, base_dir: Path) -> object:
    """Raw scenario data with each image's ``dockerfile``/``tar`` made absolute (relative to the
    scenario's folder), before validation."""
    em = data.get("emulation") if isinstance(data, dict) else None
    if not isinstance(em, dict):
        return data

    def fix(src: object) -> object:
        if not isinstance(src, dict):
            return src
        out = dict(src)
        for key in ("dockerfile", "tar"):
            if isinstance(out.get(key), str) and out[key]:
                out[key] = str((base_dir / Path(out[key]).expanduser()).resolve())
        return out

    em = dict(em)
    if "image" in em:
        em["image"] = fix(em["image"])
    if isinstance(em.get("site_images"), dict):
        em["site_images"] = {site: fix(src) for site, src in em["site_images"].items()}
    return {**data, "emulation": em}


def _file_problem(src: ImageSource) -> tuple[str, str] | None:
    """(the field, why) when the file an image names cannot be used."""
    key = "dockerfile" if src.dockerfile is not None else "tar"
    p = src.path
    if not p.exists():
        return key, f"no such file {p}"
    if not p.is_file():
        return key, f"{p} is not a regular file"
    if not os.access(p, os.R_OK):
        return key, f"{p} cannot be read"
    if src.tar is not None:
        try:
            tar_kind(p)
        except ValueError as e:
            return key, str(e)
    return None


def tar_kind(tar: Path, max_members: int = 20_000) -> str:
    """``image`` (``docker save``/OCI layout: loaded) or ``rootfs`` (a file system: imported), from the
    first member names that tell; ValueError (the reason) for neither or not a tar."""
    try:
        with tarfile.open(tar, "r:*") as tf:
            for i, member in enumerate(tf):
                name = member.name.removeprefix("./").rstrip("/")
                if name in _IMAGE_NAMES or name.startswith("blobs/") or _HEX64.match(name):
                    return "image"
                if name.split("/", 1)[0] in _ROOTFS_TOP:
                    return "rootfs"
                if i >= max_members:
                    break
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ValueError(f"not a readable tar file ({type(e).__name__})") from None
    raise ValueError("neither `docker save` output (manifest.json, blobs/) nor a root file system (etc/, usr/, "
                     "bin/) by its member names")


def image_problems(sc) -> list[tuple[str, str]]:
    """Cross-field checks: images need the docker runtime, name usable files and known sites."""
    em = sc.emulation
    named = ([("emulation.image", None, em.image)] if em.image is not None else []) + [
        (f"emulation.site_images.{site}", site, src) for site, src in em.site_images.items()]
    if not named:
        return []
    problems: list[tuple[str, str]] = []
    if not NODE_RUNTIMES.get(em.runtime).images:
        takers = " or ".join(name for name, rt in NODE_RUNTIMES.items() if rt.images)
        problems.append((named[0][0], f"an image is for containers: set emulation.runtime: {takers} (it is {em.runtime!r})"))
    sites = {s.name for s in sc.sites}
    for where, site, src in named:
        if site is not None and site not in sites:
            problems.append((where, f"no site {site!r} (sites: {', '.join(sorted(sites))})"))
        elif (bad := _file_problem(src)) is not None:
            problems.append((f"{where}.{bad[0]}", bad[1]))
    return problems


def site_image_sources(emulation, sites: list[str]) -> dict[str, tuple[str, ImageSource]]:
    """Each site's image source (its own, else the scenario's) with the field that names it; sites
    with neither are absent (they run the base image)."""
    out = {}
    for site in sites:
        if site in emulation.site_images:
            out[site] = (f"emulation.site_images.{site}", emulation.site_images[site])
        elif emulation.image is not None:
            out[site] = ("emulation.image", emulation.image)
    return out
