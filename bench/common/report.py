"""How the service benchmarks under bench/ hand over their results: the markdown table printed,
and with an output path, the same table at that path and one JSON object a result at PATH.jsonl
(imported after putting this folder on sys.path)."""

import json


def write(text, results, out_path=""):
    print(text)
    if out_path:
        with open(out_path, "w") as f:
            f.write(text + "\n")
        with open(out_path + ".jsonl", "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
