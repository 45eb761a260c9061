#!/usr/bin/env python3
"""Write the SYNTHETIC sample trace files in this folder (deterministic; no real data).

    python traces/samples/make_samples.py        # from the repository root

The files follow the real formats that ``testbed.traces`` loads (CAISO Production and
Curtailments workbook and CSV, Google 2019 power CSV, plain timestamp,value CSV) but every
number is made up by the seeded formulas below. See README.md.
"""

from __future__ import annotations

import io
import re
import zipfile
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import openpyxl

HERE = Path(__file__).resolve().parent
DAYS = [datetime(2024, 4, 20), datetime(2024, 4, 21)]  # two ordinary (non-DST) spring days
FIXED_TIME = datetime(2024, 1, 1)
PRODUCTION_COLUMNS = ["Load", "Solar", "Wind", "Net Load", "Renewables", "Nuclear", "Large Hydro",
                      "Imports", "Generation", "Thermal", "Load Less (Generation+Imports)"]
CURTAILMENT_COLUMNS = ["Date", "Hour", "Interval", "Wind Curtailment", "Solar Curtailment", "Reason"]


def caiso_tables(seed: int = 2024) -> tuple[list[list], list[list]]:
    """(production rows, curtailment rows), MW, hour-ending labels, Pacific time."""
    rng = np.random.default_rng(seed)
    production, curtailments = [], []
    for day in DAYS:
        for hour in range(1, 25):
            for interval in range(1, 13):
                h = hour - 1 + (interval - 1) / 12.0  # local hour of the interval start
                solar = max(0.0, 17500.0 * np.sin(np.pi * (h - 6.5) / 13.0)) if 6.5 < h < 19.5 else 0.0
                solar *= 1.0 + 0.02 * rng.standard_normal()
                wind = 3000.0 + 1200.0 * np.sin(2 * np.pi * (h - 3) / 24.0) + 150.0 * rng.standard_normal()
                load = 21000.0 + 6000.0 * np.sin(2 * np.pi * (h - 11.0) / 24.0)
                load += 200.0 * rng.standard_normal()
                nuclear, hydro = 2250.0, 2600.0 + 400.0 * np.sin(2 * np.pi * (h - 14) / 24.0)
                renew = solar + wind + 1700.0
                thermal = max(1500.0, load - renew - nuclear - hydro - 4000.0)
                imports = load - renew - nuclear - hydro - thermal
                generation = renew + nuclear + hydro + thermal
                vals = [load, solar, wind, load - solar - wind, renew, nuclear, hydro, imports,
                        generation, thermal, load - generation - imports]
                production.append([day, hour, interval] + [round(float(v), 2) for v in vals])
                surplus = solar + wind - 0.62 * load
                if surplus > 0:
                    solar_c = round(float(min(solar, surplus * (0.8 + 0.2 * rng.random()))), 2)
                    wind_c = round(float(max(0.0, 0.1 * surplus * rng.random())), 2)
                    reason = "Local" if h < 11 else "System"
                    curtailments.append([day, hour, interval, wind_c, solar_c, reason])
    return production, curtailments


def deterministic_zip(data: bytes) -> bytes:
    """Re-pack a zip (xlsx) with fixed entry timestamps so the bytes do not depend on the clock."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=(2024, 1, 1, 0, 0, 0))
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = 0o644 << 16
            body = src.read(info.filename)
            if info.filename == "docProps/core.xml":  # openpyxl stamps the save time here
                body = re.sub(rb"(<dcterms:modified[^>]*>)[^<]*", rb"\g<1>2024-01-01T00:00:00Z", body)
            dst.writestr(fixed, body)
    return out.getvalue()


def write_caiso_workbook(path: Path, production: list[list], curtailments: list[list]) -> None:
    wb = openpyxl.Workbook()
    wb.properties.created = wb.properties.modified = FIXED_TIME
    ws = wb.active
    ws.title = "Production"
    ws.append(["Date", "Hour", "Interval"] + PRODUCTION_COLUMNS)
    for row in production:
        ws.append(row)
    wc = wb.create_sheet("Curtailments")
    wc.append(CURTAILMENT_COLUMNS)
    for row in curtailments:
        wc.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    path.write_bytes(deterministic_zip(buf.getvalue()))


def write_caiso_csv(path: Path, curtailments: list[list]) -> None:
    lines = [",".join(CURTAILMENT_COLUMNS)]
    lines += [f"{r[0]:%Y-%m-%d},{r[1]},{r[2]},{r[3]:.2f},{r[4]:.2f},{r[5]}" for r in curtailments]
    path.write_text("\n".join(lines) + "\n")


def write_google_csv(path: Path, seed: int = 2019) -> None:
    """Two PDUs of cell 'a', two days from 2019-05-01 00:00 PT (time = 600e6 us), 5-minute samples."""
    rng = np.random.default_rng(seed)
    lines = ["time,cell,pdu,measured_power_util,production_power_util"]
    n = 2 * 288
    for pdu, level in (("pdu6", 0.62), ("pdu7", 0.48)):
        hour = (np.arange(n) * 5.0 / 60.0) % 24.0
        diurnal = 0.08 * np.sin(2 * np.pi * (hour - 9.0) / 24.0)
        noise = np.cumsum(0.004 * rng.standard_normal(n))
        measured = np.clip(level + diurnal + noise - noise.mean(), 0.05, 0.98)
        production = np.clip(measured - 0.06 - 0.02 * rng.random(n), 0.0, 1.0)
        for k in range(n):
            t_us = 600_000_000 + k * 300_000_000
            lines.append(f"{t_us},a,{pdu},{measured[k]:.5f},{production[k]:.5f}")
    path.write_text("\n".join(lines) + "\n")


def write_solar_csv(path: Path) -> None:
    """timestamp,value (kW) from the testbed's own solar model: 500 kW near San Jose, CA."""
    from testbed.traces.solar import solar_power

    tz = ZoneInfo("America/Los_Angeles")
    start = datetime(2024, 4, 20, tzinfo=tz)
    trace = solar_power(duration_s=2 * 86400, step_s=900, start=start, lat_deg=37.34, lon_deg=-121.89,
                        capacity_kw=500.0, cloud_seed=7, name="solar-site")
    lines = ["timestamp,value"]
    for t, v in zip(trace.times_s, trace.values):
        lines.append(f"{(start + timedelta(seconds=float(t))).isoformat()},{v:.3f}")
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    production, curtailments = caiso_tables()
    write_caiso_workbook(HERE / "caiso-sample.xlsx", production, curtailments)
    write_caiso_csv(HERE / "caiso-curtailments-sample.csv", curtailments)
    write_google_csv(HERE / "google-power-sample.csv")
    write_solar_csv(HERE / "solar-site.csv")
    for p in sorted(HERE.glob("*.*")):
        print(f"{p.name:36s} {p.stat().st_size:8d} bytes")


if __name__ == "__main__":
    main()
