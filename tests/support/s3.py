"""A real S3 API on this machine: moto's server (PyPI ``moto[server]``), started on a free port,
a bucket per test. Nothing reaches the internet; the credentials are moto's dummies, set in the
environment, where pyarrow (and so raysweep and Ray) read them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # no instance role to look for: a missing key fails at once
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    port: int
    proc: subprocess.Popen

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, **_boto_credentials())

    def bucket(self) -> str:
        """A new empty bucket."""
        name = f"sweeps-{uuid.uuid4().hex[:10]}"
        self.client().create_bucket(Bucket=name)
        return name

    def uri(self, bucket: str, prefix: str = "runs") -> str:
        return f"s3://{bucket}/{prefix}?endpoint_override=127.0.0.1:{self.port}&scheme=http"

    def keys(self, bucket: str) -> dict[str, int]:
        """Every object in ``bucket``: key -> size."""
        out: dict[str, int] = {}
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket):
            out |= {o["Key"]: o["Size"] for o in page.get("Contents", [])}
        return out


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


def start_s3() -> S3Server:
    port = _free_port()
    moto = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return S3Server(port, proc)
        except OSError:
            assert proc.poll() is None, "moto_server exited at start"
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("moto_server did not listen within 60 s")


def serve():
    """The fixture's body: the server, with moto's credentials in this process's environment (the
    CLI and the Ray nodes the tests start inherit it), both gone after."""
    before = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    server = start_s3()
    try:
        yield server
    finally:
        server.proc.kill()
        server.proc.wait()
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
