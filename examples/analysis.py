"""A data-analysis run: pandas reads the sales CSV from /input, computes revenue per month and
region, and leaves a chart and a summary CSV in /output. Run it with pandas and pyplot preloaded
and analysis_warmup.py as the warm-up (README), so the imports and first-time work cost
nothing."""
import matplotlib.pyplot as plt
import pandas as pd

sales = pd.read_csv("/input/sales.csv", parse_dates=["date"])
sales["revenue"] = sales["units"] * sales["unit_price"]
monthly = (sales.set_index("date").groupby("region")["revenue"].resample("MS").sum()
           .unstack("region").round(2))
monthly.index = monthly.index.strftime("%Y-%m")
monthly.to_csv("/output/monthly_revenue.csv")

ax = monthly.plot(kind="bar", stacked=True, figsize=(9, 4.5), width=0.8)
ax.set_title("Revenue per month and region")
ax.set_xlabel("month")
ax.set_ylabel("revenue")
plt.tight_layout()
plt.savefig("/output/monthly_revenue.png", dpi=100)

best = monthly.sum().idxmax()
print(f"{len(sales)} sales, {monthly.values.sum():,.2f} in revenue; best region: {best}")
print(monthly.tail(3).to_string())
