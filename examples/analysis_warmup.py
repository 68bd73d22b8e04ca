"""Priming for analysis.py (`--warmup-file`): the template runs this once, after preloading
pandas and pyplot, so the first-time work of a CSV read, a grouped resample and a chart
(lazy imports, parser and renderer set-up) is shared by every run instead of redone by each.
It works on a tiny frame of its own and writes nothing: its output is discarded."""
import io

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib import font_manager

frame = pd.read_csv(io.StringIO("date,region,units,unit_price\n2024-01-05,north,3,2.5\n"
                                "2024-02-07,south,1,4.0\n"), parse_dates=["date"])
frame["revenue"] = frame["units"] * frame["unit_price"]
monthly = (frame.set_index("date").groupby("region")["revenue"].resample("MS").sum()
           .unstack("region"))
monthly.index = monthly.index.strftime("%Y-%m")
monthly.to_csv(io.StringIO())
ax = monthly.plot(kind="bar", stacked=True, figsize=(3, 2))
ax.set_title("warm-up")
plt.tight_layout()
plt.savefig(io.BytesIO(), format="png")
plt.close("all")
print(f"{monthly.values.sum():,.2f}", monthly.sum().idxmax(), monthly.tail(1).to_string())
# matplotlib keeps the font files it rendered with open; a warm-up may leave no descriptor
# open (a cell closes the template's), so its font cache is emptied.
font_manager._get_font.cache_clear()
