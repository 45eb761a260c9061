#!/usr/bin/env python3
"""Write ``topologies/us-100.yaml``, deterministically, from the city list below (no downloads).

    python topologies/make_topologies.py           # (re)write us-100.yaml beside this script
    python topologies/make_topologies.py --check   # exit 1 if the file differs from what it would write

us-100 is the PowerTrip study's network (arXiv 2507.17904): 100 power-constrained sites train one
model with synchronous FedAvg, and in every round the selected sites exchange model updates with
one aggregator. So the graph is a star: every site has one link to ``agg``, placed in Kansas City
(the most central large US city; Kansas City itself is therefore not one of the 100 sites).

Sites: roughly the 101 most populous US cities in 2020-census order, minus Kansas City; coordinates
are approximate city centres rounded to 0.01 deg (~1 km: irrelevant next to WAN routes). Honolulu
and Anchorage are kept: they give the site ranking and the 1000-mile radius baseline far sites.

Classes, by population rank (the list order):

=========  ======  ================================  ====================  =====
class      ranks   site -> agg / agg -> site Gbit/s  node type             nodes
=========  ======  ================================  ====================  =====
metro      1-20    10 / 10                           a100-server           8
regional   21-50   2.5 or 5 (seeded), symmetric      rtx4090-minipc        6
small      51-100  1 / 2.5 or 2.5 / 5 (seeded)       rtx4090-minipc (4) or jetson-thor (8), seeded
=========  ======  ================================  ====================  =====

Small sites have asymmetric access links: the uplink (model updates, ``bandwidth_gbps`` from the
site to ``agg``) is a class below the downlink (the global model, ``bandwidth_b_to_a_gbps``).
Seeded choices use :func:`testbed.spec.topology_build.stable_choice` (SHA-256 of seed and site
name), so each site's draw is the same on every platform and does not depend on list order.
Latency is left out: it follows from great-circle distance (``testbed/spec/geo.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

from testbed.spec.topology import Link, Site, Topology  # noqa: E402
from testbed.spec.topology_build import graph_problems, render_yaml, stable_choice  # noqa: E402

SEED = 250717904  # the PowerTrip arXiv id
AGGREGATOR = ("agg", 39.10, -94.58)  # Kansas City, MO

# (site name, lat_deg, lon_deg), most populous first.
CITIES = (
    ("newyork", 40.71, -74.01), ("losangeles", 34.05, -118.24), ("chicago", 41.88, -87.63),
    ("houston", 29.76, -95.37), ("phoenix", 33.45, -112.07), ("philadelphia", 39.95, -75.17),
    ("sanantonio", 29.42, -98.49), ("sandiego", 32.72, -117.16), ("dallas", 32.78, -96.80),
    ("sanjose", 37.34, -121.89), ("austin", 30.27, -97.74), ("jacksonville", 30.33, -81.66),
    ("fortworth", 32.76, -97.33), ("columbus", 39.96, -83.00), ("indianapolis", 39.77, -86.16),
    ("charlotte", 35.23, -80.84), ("sanfrancisco", 37.77, -122.42), ("seattle", 47.61, -122.33),
    ("denver", 39.74, -104.99), ("washington", 38.91, -77.04), ("nashville", 36.16, -86.78),
    ("oklahomacity", 35.47, -97.52), ("elpaso", 31.76, -106.49), ("boston", 42.36, -71.06),
    ("portland", 45.52, -122.68), ("lasvegas", 36.17, -115.14), ("detroit", 42.33, -83.05),
    ("memphis", 35.15, -90.05), ("louisville", 38.25, -85.76), ("baltimore", 39.29, -76.61),
    ("milwaukee", 43.04, -87.91), ("albuquerque", 35.08, -106.65), ("tucson", 32.22, -110.97),
    ("fresno", 36.74, -119.79), ("sacramento", 38.58, -121.49), ("mesa", 33.42, -111.83),
    ("atlanta", 33.75, -84.39), ("omaha", 41.26, -95.93), ("coloradosprings", 38.83, -104.82),
    ("raleigh", 35.78, -78.64), ("longbeach", 33.77, -118.19), ("virginiabeach", 36.85, -75.98),
    ("miami", 25.76, -80.19), ("oakland", 37.80, -122.27), ("minneapolis", 44.98, -93.27),
    ("tulsa", 36.15, -95.99), ("bakersfield", 35.37, -119.02), ("wichita", 37.69, -97.34),
    ("arlington", 32.74, -97.11), ("aurora", 39.73, -104.83), ("tampa", 27.95, -82.46),
    ("neworleans", 29.95, -90.07), ("cleveland", 41.50, -81.69), ("honolulu", 21.31, -157.86),
    ("anaheim", 33.84, -117.91), ("lexington", 38.04, -84.50), ("stockton", 37.96, -121.29),
    ("corpuschristi", 27.80, -97.40), ("henderson", 36.04, -114.98), ("riverside", 33.95, -117.40),
    ("newark", 40.74, -74.17), ("saintpaul", 44.95, -93.09), ("santaana", 33.75, -117.87),
    ("cincinnati", 39.10, -84.51), ("irvine", 33.68, -117.83), ("orlando", 28.54, -81.38),
    ("pittsburgh", 40.44, -80.00), ("stlouis", 38.63, -90.20), ("greensboro", 36.07, -79.79),
    ("jerseycity", 40.73, -74.08), ("anchorage", 61.22, -149.90), ("lincoln", 40.81, -96.70),
    ("plano", 33.02, -96.70), ("durham", 35.99, -78.90), ("buffalo", 42.89, -78.88),
    ("chandler", 33.31, -111.84), ("chulavista", 32.64, -117.08), ("toledo", 41.65, -83.54),
    ("madison", 43.07, -89.40), ("gilbert", 33.35, -111.79), ("reno", 39.53, -119.81),
    ("fortwayne", 41.08, -85.14), ("northlasvegas", 36.20, -115.12), ("stpetersburg", 27.77, -82.64),
    ("lubbock", 33.58, -101.86), ("irving", 32.81, -96.95), ("laredo", 27.51, -99.51),
    ("winstonsalem", 36.10, -80.24), ("chesapeake", 36.77, -76.29), ("glendale", 33.54, -112.19),
    ("garland", 32.91, -96.64), ("scottsdale", 33.49, -111.93), ("norfolk", 36.85, -76.29),
    ("boise", 43.62, -116.20), ("fremont", 37.55, -121.99), ("spokane", 47.66, -117.43),
    ("santaclarita", 34.39, -118.54), ("batonrouge", 30.45, -91.19), ("richmond", 37.54, -77.44),
    ("tacoma", 47.25, -122.44),
)

SMALL_LINKS = ((1.0, 2.5), (2.5, 5.0))  # (uplink, downlink) Gbit/s
SMALL_NODES = (("rtx4090-minipc", 4), ("jetson-thor", 8))


def site_class(rank: int) -> str:
    """Rank 1 is the most populous city."""
    return "metro" if rank <= 20 else "regional" if rank <= 50 else "small"


def _site_and_link(rank: int, name: str, lat: float, lon: float) -> tuple[Site, Link]:
    cls = site_class(rank)
    if cls == "metro":
        (node_type, nodes), up, down = ("a100-server", 8), 10.0, 10.0
    elif cls == "regional":
        (node_type, nodes), up = ("rtx4090-minipc", 6), stable_choice(SEED, f"{name}/link", (2.5, 5.0))
        down = up
    else:
        (node_type, nodes), (up, down) = stable_choice(SEED, f"{name}/node", SMALL_NODES), \
            stable_choice(SEED, f"{name}/link", SMALL_LINKS)
    site = Site(name=name, lat_deg=lat, lon_deg=lon, node_type=node_type, nodes=nodes)
    link = Link(a=name, b=AGGREGATOR[0], bandwidth_gbps=up, bandwidth_b_to_a_gbps=down if down != up else None)
    return site, link


def us100() -> tuple[Topology, dict[str, str]]:
    """The topology and a comment per site (its class and rank)."""
    name, lat, lon = AGGREGATOR
    sites = [Site(name=name, lat_deg=lat, lon_deg=lon, node_type="a100-server", nodes=4)]
    links, comments = [], {name: "aggregator (Kansas City, MO)"}
    for rank, (city, lat, lon) in enumerate(CITIES, start=1):
        site, link = _site_and_link(rank, city, lat, lon)
        sites.append(site)
        links.append(link)
        comments[city] = f"{site_class(rank)}, rank {rank}"
    topo = Topology(name="us-100", description="100 power-constrained US sites in a star around one FedAvg aggregator.",
                    sites=sites, links=links)
    problems = graph_problems(topo)
    if problems or len(CITIES) != 100:
        raise ValueError(f"us-100 is malformed: {problems or f'{len(CITIES)} cities'}")
    return topo, comments


HEADER = (
    "us-100: 100 power-constrained sites for the PowerTrip study (arXiv 2507.17904), synchronous FedAvg:",
    "every round the selected sites exchange model updates with the aggregator `agg` (Kansas City), so",
    "each site has one link to it (a star). GENERATED by topologies/make_topologies.py: edit the script,",
    "not this file. Sites: ~the 100 most populous US cities (2020 census order; Kansas City hosts agg).",
    "Classes by rank: metro 1-20 (10 Gbit/s, 8 x a100-server), regional 21-50 (2.5 or 5 Gbit/s, 6 x",
    "rtx4090-minipc), small 51-100 (asymmetric: 1 up / 2.5 down or 2.5 / 5; 4 x rtx4090-minipc or",
    "8 x jetson-thor). bandwidth_gbps is site -> agg (updates), bandwidth_b_to_a_gbps agg -> site.",
    "Latency follows from great-circle distance (testbed/spec/geo.py).",
)


def render() -> str:
    topo, comments = us100()
    return render_yaml(topo, HEADER, site_comments=comments)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if us-100.yaml differs from the generated text")
    parser.add_argument("--out", type=Path, default=HERE / "us-100.yaml")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'differs from the generator'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
