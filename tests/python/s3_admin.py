"""Set up and change S3 test data with an independent client (boto3).

Usage: s3_admin.py ENDPOINT COMMAND ARGS...
  bucket NAME versioned|unversioned   create a bucket
  upload NAME PREFIX DIR              upload every file under DIR
  download NAME PREFIX DIR            write every object under PREFIX below DIR
  put NAME KEY FILE                   put one object from a file ('-' = stdin)
  delete NAME KEY                     delete one object
  get NAME KEY                        print one object
  keys NAME                           print every key, one per line
"""

import os
import sys

import boto3
from botocore.config import Config


def client(endpoint: str):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="pchronicle-test",
        aws_secret_access_key="pchronicle-test-secret",
        config=Config(s3={"addressing_style": "path"}),
    )


def main() -> None:
    endpoint, command, *args = sys.argv[1:]
    s3 = client(endpoint)
    if command == "bucket":
        name, mode = args
        s3.create_bucket(Bucket=name)
        if mode == "versioned":
            s3.put_bucket_versioning(
                Bucket=name, VersioningConfiguration={"Status": "Enabled"}
            )
    elif command == "upload":
        name, prefix, root = args
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                with open(path, "rb") as fh:
                    s3.put_object(Bucket=name, Key=prefix + rel, Body=fh.read())
    elif command == "put":
        name, key, path = args
        body = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()
        s3.put_object(Bucket=name, Key=key, Body=body)
    elif command == "delete":
        name, key = args
        s3.delete_object(Bucket=name, Key=key)
    elif command == "get":
        name, key = args
        sys.stdout.buffer.write(s3.get_object(Bucket=name, Key=key)["Body"].read())
    elif command == "download":
        # Every object under PREFIX, written below ROOT by its key's rest.
        name, prefix, root = args
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=name, Prefix=prefix)
        for page in pages:
            for o in page.get("Contents", []):
                path = os.path.join(root, o["Key"][len(prefix) :])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as fh:
                    fh.write(s3.get_object(Bucket=name, Key=o["Key"])["Body"].read())
    elif command == "keys":
        (name,) = args
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=name)
        for page in pages:
            for o in page.get("Contents", []):
                print(o["Key"])
    elif command == "requests":
        import urllib.request

        (name,) = args
        with urllib.request.urlopen(f"{endpoint}/_pchronicle_requests/{name}") as r:
            print(r.read().decode())
    elif command == "sizes":
        (name,) = args
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=name)
        for page in pages:
            for o in page.get("Contents", []):
                print(f"{o['Key']}\t{o['Size']}")
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
