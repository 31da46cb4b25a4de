"""Build step of the embedding-client package (metadata: pyproject.toml): the gRPC stubs are
generated from proto/embedding/v1 with protoc and grpc_python_plugin while the package is built
(gen_stubs.py), so they are never committed and always match the proto."""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_stubs  # noqa: E402  (next to this file, not installed)


class BuildPyWithStubs(build_py):
    """build_py, then the stubs (packages embedding, embedding.v1) into the build folder."""

    def run(self):
        super().run()
        self._stubs = gen_stubs.generate(gen_stubs.proto_root(), self.build_lib)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + getattr(self, "_stubs", [])


setup(cmdclass={"build_py": BuildPyWithStubs})
