#!/usr/bin/env python3
"""Prints docs/openapi.yaml as compact JSON, the form ofcd serves at /v1/openapi.json.

Usage: openapi_json.py docs/openapi.yaml > build/gen/openapi.json
"""
import json
import sys

import yaml


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    # Status codes are YAML integers; JSON keys are strings, as OpenAPI wants them.
    json.dump(doc, sys.stdout, separators=(",", ":"), ensure_ascii=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
