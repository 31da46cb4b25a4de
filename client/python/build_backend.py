"""The PEP 517 build backend of the embedding-client package (pyproject.toml names it, in-tree).

It needs nothing but the Python standard library, protoc and grpc_python_plugin: no setuptools
and no `wheel` package, so `pip install client/python` builds in any venv of Python 3.9 or later,
with or without a package index, and with or without build isolation (its build requirements are
none). The wheel holds embedding_client (the module, or the package folder if there is one) and
the gRPC stubs generated from proto/embedding/v1 (gen_stubs.py), so they always match the proto.
The sdist carries the proto files, so a wheel builds from it too.
"""

import base64
import hashlib
import io
import os
import re
import sys
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_stubs  # noqa: E402  (next to this file, not installed)

try:
    import tomllib  # Python 3.11+
except ImportError:  # 3.9 and 3.10: the few fields this backend reads, by hand
    tomllib = None


def _project():
    """pyproject.toml's [project] table: name, version, description, requires-python,
    dependencies (the only fields used)."""
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        data = f.read()
    if tomllib is not None:
        return tomllib.loads(data.decode())["project"]
    text = data.decode().split("[project]", 1)[1].split("\n[", 1)[0]
    project = {}
    for key, value in re.findall(r'^([a-z-]+)\s*=\s*(.+)$', text, re.M):
        if value.startswith("["):
            project[key] = re.findall(r'"([^"]*)"', value)
        else:
            project[key] = value.strip().strip('"')
    return project


def _names():
    project = _project()
    name = re.sub(r"[-_.]+", "_", project["name"]).lower()  # the wheel's spelling
    return project, name, "%s-%s" % (name, project["version"])


def _metadata(project):
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"],
             "Version: " + project["version"], "Summary: " + project.get("description", ""),
             "Requires-Python: " + project.get("requires-python", ">=3.9")]
    lines += ["Requires-Dist: " + d for d in project.get("dependencies", [])]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(HERE, "README.md")) as f:
        return "\n".join(lines) + "\n\n" + f.read()


def _sources():
    """(path in the wheel, path on disk) of embedding_client's own Python files."""
    files = []
    if os.path.isfile(os.path.join(HERE, "embedding_client.py")):
        files.append(("embedding_client.py", os.path.join(HERE, "embedding_client.py")))
    package = os.path.join(HERE, "embedding_client")
    for folder, dirs, names in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for n in sorted(names):
            if n.endswith(".py") or n == "py.typed":
                path = os.path.join(folder, n)
                files.append((os.path.relpath(path, HERE).replace(os.sep, "/"), path))
    if not files:
        raise RuntimeError("no embedding_client.py or embedding_client/ in " + HERE)
    return files


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project, name, base = _names()
    dist_info = base + ".dist-info"
    entries = []  # (arcname, bytes)
    for arcname, path in _sources():
        with open(path, "rb") as f:
            entries.append((arcname, f.read()))
    with tempfile.TemporaryDirectory() as stubs:
        for path in gen_stubs.generate(gen_stubs.proto_root(), stubs):
            with open(path, "rb") as f:
                entries.append((os.path.relpath(path, stubs).replace(os.sep, "/"), f.read()))
    top_level = sorted({a.split("/")[0].rsplit(".py", 1)[0] for a, _ in entries})
    entries += [
        (dist_info + "/METADATA", _metadata(project).encode()),
        (dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: embedding-client build_backend\n"
                               b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
        (dist_info + "/top_level.txt", ("\n".join(top_level) + "\n").encode()),
    ]
    record = [_record_line(a, d) for a, d in entries] + [dist_info + "/RECORD,,"]
    entries.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode()))
    filename = base + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w",
                         zipfile.ZIP_DEFLATED) as whl:
        for arcname, data in entries:
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
    return filename


def build_sdist(sdist_directory, config_settings=None):
    """client/python's files, and proto/embedding/v1 as proto/ (gen_stubs.proto_root finds it
    there when the sdist is built into a wheel)."""
    project, name, base = _names()
    filename = base + ".tar.gz"
    files = [(n, os.path.join(HERE, n)) for n in
             ("pyproject.toml", "README.md", "build_backend.py", "gen_stubs.py")]
    files += _sources()
    root = gen_stubs.proto_root()
    files += [("proto/" + p, os.path.join(root, p)) for p in gen_stubs.PROTOS]
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz",
                      format=tarfile.PAX_FORMAT) as tar:
        pkg_info = _metadata(project).encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
        for arcname, path in files:
            tar.add(path, arcname=base + "/" + arcname)
    return filename
