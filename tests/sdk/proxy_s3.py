"""boto3 through `ifmatch proxy` in front of an S3 endpoint: an object read whole, by ranges and
by parts of a range, each from the store once stored, with boto3 checking each answer's
checksum (`x-amz-checksum-mode`), and without credentials, as public objects are read.

Usage: proxy_s3.py S3_ENDPOINT PROXY_URL
"""

import os
import sys

import boto3
from botocore import UNSIGNED
from botocore.config import Config

origin, proxy = sys.argv[1], sys.argv[2]
owner = boto3.client(
    "s3",
    endpoint_url=origin,
    aws_access_key_id="test",
    aws_secret_access_key="test",
    region_name="us-east-1",
)
owner.create_bucket(Bucket="reads")
data = os.urandom(100_000)
owner.put_object(
    Bucket="reads",
    Key="object.bin",
    Body=data,
    ACL="public-read",
    CacheControl="public, max-age=3600",
    ChecksumAlgorithm="CRC32",
)

anonymous = boto3.client(
    "s3",
    endpoint_url=proxy,
    region_name="us-east-1",
    config=Config(signature_version=UNSIGNED),
)
passed = 0


def read(want, status, **ranged):
    global passed
    answer = anonymous.get_object(Bucket="reads", Key="object.bin", **ranged)
    got = answer["Body"].read()
    cache_status = answer["ResponseMetadata"]["HTTPHeaders"].get("cache-status", "")
    assert got == want, f"{ranged}: {len(got)} bytes"
    assert status in cache_status, f"{ranged}: {cache_status}"
    passed += 1


read(data[1000:2000], "fwd=miss", Range="bytes=1000-1999")
read(data[1000:2000], "hit", Range="bytes=1000-1999")
read(data[1500:1600], "hit", Range="bytes=1500-1599")
read(data, "fwd=miss")
read(data, "hit")
read(data[10:20], "hit", Range="bytes=10-19")
read(data[-5:], "hit", Range="bytes=-5")
print(f"boto3 proxy reads: {passed} passed")
