"""A host tool for `snapcell run --tool`: reads {"currency": "EUR"} on stdin and prints the rate
to US dollars as JSON. Unknown currencies exit non-zero, which the code sees as ToolError."""
import json
import sys

RATES = {"USD": 1.0, "EUR": 1.08, "GBP": 1.27}

args = json.load(sys.stdin)
currency = args.get("currency")
if currency not in RATES:
    sys.exit(f"no rate for currency {currency!r}")
print(json.dumps({"currency": currency, "usd": RATES[currency]}))
