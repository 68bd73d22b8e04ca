import asyncio, bz2, concurrent.futures, csv, ctypes, decimal, email.message, email.parser, gzip, io, locale, lzma, multiprocessing, os, sqlite3, ssl, tempfile, xml.etree.ElementTree as ET, zoneinfo, datetime, hashlib, json, mimetypes, subprocess, sys
def sq(x): return x * x
checks = {}
checks["zoneinfo"] = str(datetime.datetime(2024, 1, 1, tzinfo=zoneinfo.ZoneInfo("America/New_York")).utcoffset())
db = sqlite3.connect(":memory:"); db.execute("create table t(a)"); db.executemany("insert into t values (?)", [(1,), (2,)])
checks["sqlite3"] = db.execute("select sum(a) from t").fetchone()[0]
with concurrent.futures.ThreadPoolExecutor(4) as ex: checks["threads"] = sum(ex.map(sq, range(5)))
async def main(): return sum(await asyncio.gather(*(asyncio.sleep(0, i) for i in range(4))))
checks["asyncio"] = asyncio.run(main())
with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "f"), "w") as f: f.write("x")
    checks["tempfile"] = os.listdir(d)
checks["ssl"] = len(ssl.create_default_context().get_ca_certs()) > 10
checks["locale"] = locale.setlocale(locale.LC_ALL, "C.UTF-8")
buf = io.StringIO(); csv.writer(buf).writerow(["a", 1]); checks["csv"] = buf.getvalue()
checks["decimal"] = str(decimal.Decimal("0.1") + decimal.Decimal("0.2"))
checks["compress"] = all(m.decompress(m.compress(b"abc" * 100)) == b"abc" * 100 for m in (gzip, lzma, bz2))
checks["xml"] = ET.fromstring("<a><b>1</b></a>").find("b").text
m = email.message.EmailMessage(); m["Subject"] = "hi"; m.set_content("body")
checks["email"] = email.parser.Parser().parsestr(m.as_string())["Subject"]
if sys.version_info >= (3, 11):  # tomllib is new in 3.11
    import tomllib
    checks["tomllib"] = tomllib.loads('a = 1')["a"]
checks["ctypes"] = ctypes.CDLL("libc.so.6").abs(-3)
CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int); checks["ctypes_cb"] = CB(lambda x: x + 1)(1)
with multiprocessing.get_context("fork").Pool(2) as p: checks["mp_fork"] = sum(p.map(sq, range(4)))
checks["mimetypes"] = mimetypes.guess_type("a.csv")[0]
checks["hashlib"] = hashlib.sha256(b"").hexdigest()[:8]
print(json.dumps(checks, sort_keys=True))
