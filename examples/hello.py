# A first run: standard library, a traceback-free computation, an artifact-free result.
import json
import statistics

samples = [12.5, 13.1, 11.8, 14.2, 12.9]
print(json.dumps({"mean": statistics.mean(samples), "stdev": round(statistics.stdev(samples), 3)}))
