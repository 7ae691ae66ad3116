"""bench/web/plot.py: the plots of the web benchmark, from the results.json that `bench.php report` writes.

    /usr/bin/python3 bench/web/plot.py RESULTS_JSON OUT_DIR

Writes OUT_DIR/web-bench-rps.png (req/s per row: median over the rounds, the slowest and fastest round as error
bars, the ratio to the group's best baseline beside each bar) and OUT_DIR/web-bench-latency.png (p50 and p99 per
row, log scale), one panel per web server and ab load setting; and OUT_DIR/web-bench-reads.png (the read latency
inside the page from the probes: mean in long-lived workers, and first read in fresh ones), one panel per web
server. Tether's rows in orange.
Needs matplotlib (Debian: python3-matplotlib, for /usr/bin/python3).
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERVER_NAMES = {"apache": "apache2 prefork + mod_php", "nginx": "nginx + php-fpm"}
COLORS = {"baseline": "#7f8c9d", "tether": "#e8731a", "reference": "#6aa56a"}
GROUP_SHORT = {
    "floor": "Floor",
    "mysql-select1": "MariaDB SELECT 1",
    "mysql-point": "MariaDB point read",
    "pg-point": "PostgreSQL point read",
    "mysql-n1": "MariaDB, 1 read a page",
    "mysql-n5": "MariaDB, 5 reads a page",
    "mysql-n20": "MariaDB, 20 reads a page",
    "pg-n1": "PostgreSQL, 1 read a page",
    "pg-n5": "PostgreSQL, 5 reads a page",
    "pg-n20": "PostgreSQL, 20 reads a page",
    "cass-row": "Cassandra get('a') (E1)",
    "cass-super": "Cassandra get_super_column (E1)",
    "bt-point": "Bigtable random read (E2)",
}


def layout(res):
    """layout returns the y positions of the rows and of the group headings, top to bottom, as (ys, labels, kinds)."""
    measured = {key for srv in res["servers"].values() for cells in srv["cells"].values() for key in cells}
    ys, labels, kinds, keys = [], [], [], []
    y = 0
    group = None
    for key, row in res["rows"].items():
        if key not in measured:
            continue
        if row["group"] != group:
            group = row["group"]
            if ys:
                y += 0.6
            ys.append(y)
            labels.append(GROUP_SHORT.get(group, group))
            kinds.append("heading")
            keys.append(None)
            y += 1
        ys.append(y)
        labels.append(row["label"] + (" *" if row["role"] == "reference" else ""))
        kinds.append(row["role"])
        keys.append(key)
        y += 1
    return ys, labels, kinds, keys


def panels(res):
    """panels returns (server, setting key, setting label, cells) for every panel, servers as rows of the grid."""
    out = []
    for server, srv in res["servers"].items():
        for sk, cells in srv["cells"].items():
            out.append((server, sk, srv["settings"][sk]["label"], cells))
    return out


def grid(res, title, ys):
    servers = list(res["servers"])
    ncols = max(len(srv["cells"]) for srv in res["servers"].values())
    # About a fifth of an inch per row, so that the labels stay legible however many rows there are.
    height = max(7.2, 0.21 * (max(ys) - min(ys) + 1) + 1.5)
    fig, axes = plt.subplots(len(servers), ncols, figsize=(4.6 * ncols + 2.6, height * len(servers)), squeeze=False,
                             sharey=True)
    quick = " (QUICK MODE: too few requests to quote)" if res.get("quick") else ""
    fig.suptitle(title + quick, fontsize=15, fontweight="bold")
    return fig, axes, servers


def style_y(ax, ys, labels, kinds):
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=9)
    for tick, kind in zip(ax.get_yticklabels(), kinds):
        if kind == "heading":
            tick.set_fontweight("bold")
            tick.set_fontsize(10)
        elif kind == "tether":
            tick.set_color(COLORS["tether"])
            tick.set_fontweight("bold")
    ax.set_ylim(max(ys) + 0.7, min(ys) - 0.7)  # top to bottom; set, not inverted: the panels share this axis
    ax.grid(axis="x", alpha=0.3)


def plot_rps(res, out):
    ys, labels, kinds, keys = layout(res)
    fig, axes, servers = grid(res, "Tether web benchmark: requests per second (higher is better)", ys)
    for i, server in enumerate(servers):
        srv = res["servers"][server]
        for j, (sk, cells) in enumerate(srv["cells"].items()):
            ax = axes[i][j]
            xmax = max(c["rps_max"] for c in cells.values())
            for y, kind, key in zip(ys, kinds, keys):
                if key is None or key not in cells:
                    continue
                c = cells[key]
                ax.barh(y, c["rps"], color=COLORS[kind], height=0.75,
                        xerr=[[c["rps"] - c["rps_min"]], [c["rps_max"] - c["rps"]]],
                        error_kw={"elinewidth": 1, "capsize": 2, "ecolor": "#333333"})
                if c["best_baseline"] == key:
                    note = "yardstick" if kind == "reference" else "best baseline"
                elif c["ratio"] is not None:
                    note = "x%.2f" % c["ratio"]
                else:
                    note = ""
                ax.text(c["rps_max"] + xmax * 0.015, y, "%s  %s" % (format(round(c["rps"]), ","), note),
                        va="center", fontsize=8, fontweight="bold" if kind == "tether" else "normal",
                        color="#b3540c" if kind == "tether" else "#222222")
            # A dashed line through each group at its best baseline (or its Go service where it has no baseline): a bar
            # that crosses it beats what sites use today.
            spans = {}
            for y, key in zip(ys, keys):
                if key in cells:
                    g = res["rows"][key]["group"]
                    lo, hi = spans.get(g, (y, y))
                    spans[g] = (min(lo, y), max(hi, y))
            for g, (lo, hi) in spans.items():
                best = next((c["best_baseline"] for k, c in cells.items() if res["rows"][k]["group"] == g), None)
                if best is not None:
                    ax.plot([cells[best]["rps"]] * 2, [lo - 0.45, hi + 0.45], linestyle="--", linewidth=1,
                            color="#444444", alpha=0.6)
            ax.set_xlim(0, xmax * 1.45)
            ax.set_title("%s, ab %s" % (SERVER_NAMES.get(server, server), srv["settings"][sk]["label"]), fontsize=11)
            ax.set_xlabel("req/s (bar: median; whiskers: slowest and fastest round;\ndashed: the group's best baseline, else its Go service)", fontsize=8)
            style_y(ax, ys, labels, kinds)
    legend(fig)
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    fig.savefig(out, dpi=80)
    plt.close(fig)


def plot_latency(res, out):
    ys, labels, kinds, keys = layout(res)
    fig, axes, servers = grid(res, "Tether web benchmark: latency per request, p50 (bar) and p99 (light bar), ms, log scale (lower is better)",
                              ys)
    for i, server in enumerate(servers):
        srv = res["servers"][server]
        for j, (sk, cells) in enumerate(srv["cells"].items()):
            ax = axes[i][j]
            for y, kind, key in zip(ys, kinds, keys):
                if key is None or key not in cells:
                    continue
                c = cells[key]
                ax.barh(y, c["p99_ms"], color=COLORS[kind], alpha=0.3, height=0.75)
                ax.barh(y, c["p50_ms"], color=COLORS[kind], height=0.75)
                ax.text(c["p99_ms"] * 1.08, y, "%.2f / %.1f" % (c["p50_ms"], c["p99_ms"]), va="center", fontsize=8,
                        fontweight="bold" if kind == "tether" else "normal")
            ax.set_xscale("log")
            lo = min(c["p50_ms"] for c in cells.values())
            hi = max(c["p99_ms"] for c in cells.values())
            ax.set_xlim(max(lo / 2, 0.01), hi * 6)
            ax.set_title("%s, ab %s" % (SERVER_NAMES.get(server, server), srv["settings"][sk]["label"]), fontsize=11)
            ax.set_xlabel("ms (labels: p50 / p99)", fontsize=8)
            style_y(ax, ys, labels, kinds)
    legend(fig)
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    fig.savefig(out, dpi=80)
    plt.close(fig)


def plot_reads(res, out):
    """plot_reads draws the probes: per server, each probed row's mean read time in long-lived workers (solid) and
    the mean first read of fresh workers (hatched), with the Go service's own database time as a thin dark bar."""
    servers = [s for s, srv in res["servers"].items() if srv.get("probes")]
    if not servers:
        return
    entries = []  # (label, kind, key, probe)
    for pk, probe in res.get("probes", {}).items():
        for key in probe["rows"]:
            row = res["rows"][key]
            # A ping (the unit of the hop targets) is in every probe: say which.
            where = "in the %s probe" % pk if row["group"] == "floor" else GROUP_SHORT.get(row["group"], row["group"])
            entries.append(("%s, %s" % (row["label"].split(" (")[0], where), row["role"], key, pk))
    fig, axes = plt.subplots(1, len(servers), figsize=(8 * len(servers) + 2, 0.75 * len(entries) + 2.5), squeeze=False,
                             sharey=True)
    quick = " (QUICK MODE: too few reads to quote)" if res.get("quick") else ""
    fig.suptitle("Tether web benchmark: read time inside the page, mean, us (lower is better)" + quick, fontsize=13,
                 fontweight="bold")
    for j, server in enumerate(servers):
        ax = axes[0][j]
        probes = res["servers"][server]["probes"]
        hi = 1
        for y, (label, kind, key, pk) in enumerate(entries):
            r = probes.get(pk, {}).get(key)
            if r is None:
                continue
            st, fr = r["steady"], r.get("fresh")
            ax.barh(y - 0.18, st["mean_us"], height=0.36, color=COLORS[kind])
            ax.text(st["mean_us"] * 1.02, y - 0.18, "%.0f" % st["mean_us"], va="center", fontsize=8)
            hi = max(hi, st["mean_us"])
            if st.get("db_us"):
                ax.barh(y - 0.18, st["db_us"], height=0.08, color="#222222")
            if fr and fr.get("mean_us") is not None:
                ax.barh(y + 0.18, fr["mean_us"], height=0.36, color=COLORS[kind], alpha=0.45, hatch="//")
                ax.text(fr["mean_us"] * 1.02, y + 0.18, "%.0f first read, fresh worker" % fr["mean_us"], va="center", fontsize=8)
                hi = max(hi, fr["mean_us"])
        ax.set_yticks(range(len(entries)))
        ax.set_yticklabels([e[0] for e in entries], fontsize=9)
        for tick, e in zip(ax.get_yticklabels(), entries):
            if e[1] == "tether":
                tick.set_color(COLORS["tether"])
                tick.set_fontweight("bold")
        ax.set_ylim(len(entries) - 0.5, -0.5)
        ax.set_xlim(0, hi * 1.6)
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(SERVER_NAMES.get(server, server), fontsize=11)
        ax.set_xlabel("us (solid: long-lived workers; hatched: first read of a fresh worker;\n"
                      "thin dark bar: the Go service's own database call)", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(out, dpi=80)
    plt.close(fig)


def legend(fig):
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[k]) for k in ("tether", "baseline", "reference")]
    fig.legend(handles, ["Tether", "what PHP sites use today (baselines)", "* Go service of seeds E1, E2 (reference)"],
               loc="lower center", ncol=3, fontsize=11, frameon=False)


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: plot.py RESULTS_JSON OUT_DIR")
    with open(argv[1]) as f:
        res = json.load(f)
    os.makedirs(argv[2], exist_ok=True)
    plot_rps(res, os.path.join(argv[2], "web-bench-rps.png"))
    plot_latency(res, os.path.join(argv[2], "web-bench-latency.png"))
    plot_reads(res, os.path.join(argv[2], "web-bench-reads.png"))


if __name__ == "__main__":
    main(sys.argv)
