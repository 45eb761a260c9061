"""Writes tests/corpus/{scenarios,sweeps,data} (the committed files are the corpus; this script is how
they were made, kept so that a change of the base scenario can be applied to all of them).

    .venv/bin/python tests/corpus/make_corpus.py .     # from the repository root; rewrites the three folders

Each file starts with ``# corpus: WHAT``, ``# expect: EXIT``, optionally ``# expect-in-output: TEXT``
and ``# run: sim`` (tests/unit/spec/test_validate_corpus.py reads them). ``@SECRETS@`` and ``@DATA@`` are
replaced by the test with folders it fills at test time (secret, huge, special and generated files).
"""
import copy, os, shutil, sys
from pathlib import Path
import yaml

ROOT = Path(sys.argv[1])
C = ROOT / "tests" / "corpus"
for d in ("scenarios", "sweeps", "data"):
    shutil.rmtree(C / d, ignore_errors=True)
    (C / d).mkdir(parents=True)

BASE = {
    "name": "corpus-base",
    "seed": 3,
    "duration_h": 12,
    "step_s": 300,
    "sites": [
        {"name": "a", "lat_deg": 45.0, "lon_deg": 9.0, "nodes": 2},
        {"name": "b", "lat_deg": 48.0, "lon_deg": 11.0, "nodes": 2},
    ],
    "links": [{"a": "a", "b": "b", "bandwidth_gbps": 10, "latency_ms": 5}],
    "traces": {"renewable": {"default": {"kind": "curtailment_windows", "capacity_kw": 2.0, "windows_per_day": 2}}},
    "workloads": {"jobs": [
        {"id": "j1", "checkpoint_gb": 40, "work_gpu_h": 6, "arrival_h": 0, "origin": "a"},
        {"id": "j2", "checkpoint_gb": 24, "work_gpu_h": 4, "arrival_h": 1, "origin": "b"},
    ]},
    "policies": ["static", "energy_only"],
}


def head(what, expect, needle=None, run=False):
    lines = [f"# corpus: {what}", f"# expect: {expect}"]
    if needle:
        lines.append(f"# expect-in-output: {needle}")
    if run:
        lines.append("# run: sim")
    return "\n".join(lines) + "\n"


def setp(d, path, value):
    node = d
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def scen(name, what, expect, needle=None, edits=(), drop=(), run=False, text=None, folder="scenarios"):
    if text is None:
        d = copy.deepcopy(BASE)
        d["name"] = name.replace("_", "-")[:60]
        for path, value in edits:
            setp(d, path, value)
        for path in drop:
            node = d
            for k in path[:-1]:
                node = node[k]
            del node[path[-1]]
        text = yaml.safe_dump(d, sort_keys=False, width=120)
    (C / folder / f"{name}.yaml").write_text(head(what, expect, needle, run) + text)


INF, NAN = float("inf"), float("nan")
# --- non-finite numbers -------------------------------------------------------------------------
scen("num_inf_duration", "non-finite: .inf duration", 2, "duration_h", [(["duration_h"], INF)])
scen("num_nan_capacity", "non-finite: .nan trace capacity", 2, "traces.renewable.default.capacity_kw",
     [(["traces", "renewable", "default", "capacity_kw"], NAN)])
scen("num_neg_inf_latitude", "non-finite: -.inf latitude", 2, "sites[0].lat_deg", [(["sites", 0, "lat_deg"], -INF)])
scen("num_inf_bandwidth", "non-finite: .inf link bandwidth", 2, "links[0].bandwidth_gbps",
     [(["links", 0, "bandwidth_gbps"], INF)])
scen("num_nan_checkpoint", "non-finite: .nan checkpoint", 2, "workloads.jobs[0].checkpoint_gb",
     [(["workloads", "jobs", 0, "checkpoint_gb"], NAN)])
scen("num_inf_in_range", "non-finite: .inf inside a [low, high] range", 2, "workloads.mix[0].checkpoint_gb",
     [(["workloads"], {"arrivals": {"jobs_per_day": 4}, "mix": [{"family": "x", "checkpoint_gb": [1, INF], "work_gpu_h": 2}]})])
scen("num_nan_policy_alpha", "non-finite: .nan policy parameter", 2, "policies[1].alpha",
     [(["policies"], ["static", {"name": "feasibility_aware", "alpha": NAN}])])
scen("num_inf_jobs_per_day", "non-finite: .inf arrival rate", 2, "workloads.arrivals.jobs_per_day",
     [(["workloads"], {"arrivals": {"jobs_per_day": INF}, "mix": [{"family": "x", "checkpoint_gb": 10, "work_gpu_h": 2}]})])
scen("num_nan_event_start", "non-finite: .nan degradation event start", 2, "traces.bandwidth.events[0].start_h",
     [(["traces", "bandwidth"], {"events": [{"link": "*", "start_h": NAN, "duration_h": 1, "degradation_pct": 20}]})])
scen("num_inf_time_scale", "non-finite: .inf emulation time scale", 2, "emulation.time_scale",
     [(["emulation"], {"time_scale": INF})])
scen("num_inf_grid_limit", "non-finite: .inf grid limit (meaning 'unlimited' is spelled null)", 2, "power.grid_limit_kw",
     [(["power"], {"grid_limit_kw": INF})])
scen("num_overflow_literal", "non-finite: 1e999 overflows to inf when read", 2, "traces.renewable.default.capacity_kw",
     text=yaml.safe_dump({**copy.deepcopy(BASE), "name": "overflow"}, sort_keys=False).replace("capacity_kw: 2.0", "capacity_kw: 1e999"))
scen("num_nan_forecast_noise", "non-finite: .nan forecast noise", 2, "traces.forecast.window.noise_pct",
     [(["traces", "forecast"], {"window": {"noise_pct": NAN}})])
# --- booleans and strings are not numbers --------------------------------------------------------
scen("bool_duration", "true is not a number", 2, "duration_h", [(["duration_h"], True)])
scen("bool_nodes", "true is not an integer", 2, "sites[1].nodes", [(["sites", 1, "nodes"], True)])
scen("bool_seed", "false is not a seed", 2, "seed", [(["seed"], False)])
scen("bool_in_pair", "true inside a [low, high] pair", 2, "traces.renewable.default.mean_util",
     [(["traces", "renewable", "default"], {"kind": "google_synthetic", "capacity_kw": 3, "mean_util": [True, 0.5]})])
scen("str_number", "a quoted number is a string", 2, "links[0].bandwidth_gbps", [(["links", 0, "bandwidth_gbps"], "10")])
scen("float_for_integer", "2.5 nodes", 2, "sites[0].nodes", [(["sites", 0, "nodes"], 2.5)])
scen("bool_checkpoint", "true as a checkpoint size", 2, "workloads.jobs[1].checkpoint_gb",
     [(["workloads", "jobs", 1, "checkpoint_gb"], True)])
# --- YAML structure ----------------------------------------------------------------------------
base_text = yaml.safe_dump({**copy.deepcopy(BASE), "name": "yaml-case"}, sort_keys=False, width=120)
scen("yaml_dup_top_key", "duplicate top-level key (last would win)", 2, ":7: duplicate key 'duration_h' (first at line 5)", text="name: dup\nduration_h: 12\nseed: 1\nduration_h: 48\n" + base_text.split("\n", 4)[4])
scen("yaml_dup_nested_key", "duplicate key inside a site", 2, "duplicate key 'lat_deg'",
     text=base_text.replace("  lat_deg: 45.0\n", "  lat_deg: 45.0\n  lat_deg: 46.0\n", 1))
scen("yaml_dup_flow_key", "duplicate key in a flow mapping", 2, "duplicate key 'a'",
     text=base_text.replace("links:\n", "links:\n- {a: a, a: b, b: b, bandwidth_gbps: 1}\n", 1))
scen("yaml_dup_policy_key", "duplicate key in a policy", 2, "duplicate key 'alpha'",
     text=base_text.replace("policies:\n", "policies:\n- {name: feasibility_aware, alpha: 0.1, alpha: 0.9}\n", 1))
bomb = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i-1}" if i else "lol"] * 9) + "]\n" for i in range(10))
scen("yaml_alias_bomb", "billion laughs in an unknown field", 2, "alias",
     text="name: bomb\n" + bomb + base_text.split("\n", 1)[1])
scen("yaml_alias_bomb_jobs", "alias bomb in the jobs list", 2, "alias",
     text=base_text.split("workloads:")[0] + "x0: &x0 {id: j, checkpoint_gb: 1, work_gpu_h: 1}\n"
     + "".join(f"x{i}: &x{i} [" + ", ".join([f"*x{i-1}"] * 10) + "]\n" for i in range(1, 8))
     + "workloads:\n  jobs: *x7\npolicies: [static]\n")
scen("yaml_alias_cycle", "an anchor that contains itself", 2, "cycle",
     text=base_text.replace("links:\n", "loop: &loop [1, *loop]\nlinks:\n", 1))
scen("yaml_undefined_alias", "alias with no anchor", 2, "undefined alias",
     text=base_text.replace("duration_h: 12", "duration_h: *nowhere", 1))
scen("yaml_tab_indent", "a tab where indentation goes", 2, "not valid YAML",
     text=base_text.replace("  renewable:", "\trenewable:", 1))
scen("yaml_unclosed_flow", "an unclosed flow list", 2, "not valid YAML",
     text=base_text.replace("policies:\n- static\n- energy_only\n", "policies: [static, energy_only\n"))
scen("yaml_python_tag", "a python object tag (code execution in unsafe loaders)", 2, "not valid YAML",
     text=base_text.replace("description", "x") + "hook: !!python/object/apply:os.system [\"echo CORPUS-TAG-PAYLOAD\"]\n")
scen("yaml_list_top", "a list instead of a mapping", 2, "must be a YAML mapping", text="- name: x\n- duration_h: 1\n")
scen("yaml_scalar_top", "a bare string", 2, "must be a YAML mapping", text="just some words\n")
scen("yaml_comments_only", "only comments", 2, "empty", text="# nothing here\n")
scen("yaml_multi_document", "two YAML documents in one file", 2, "not valid YAML", text=base_text + "---\nname: second\n")
(C / "scenarios" / "yaml_not_utf8.yaml").write_bytes(head("bytes that are not UTF-8", 2, "not UTF-8").encode() + b"name: \xff\xfe\xfa\n")
(C / "scenarios" / "yaml_nul_byte.yaml").write_bytes(head("a NUL byte", 2, "not valid YAML").encode() + b"name: a\x00b\n")
scen("yaml_merge_keys_valid", "anchors and merge keys used properly (valid)", 0, run=True,
     text="name: merge-valid\nduration_h: 6\nsites:\n  - &sa {name: a, lat_deg: 45.0, lon_deg: 9.0, nodes: 2}\n  - {<<: *sa, name: b, lon_deg: 11.0}\n"
     "links: [{a: a, b: b, bandwidth_gbps: 10, latency_ms: 5}]\ntraces:\n  renewable:\n    default: &cw {kind: curtailment_windows, capacity_kw: 2.0}\n"
     "    b: {<<: *cw, capacity_kw: 3.0}\nworkloads:\n  jobs:\n    - &job {id: j1, checkpoint_gb: 40, work_gpu_h: 3, arrival_h: 0, origin: a}\n"
     "    - {<<: *job, id: j2, origin: b}\npolicies: [static, energy_only]\n")
# --- ordinary malformed fields ------------------------------------------------------------------------
scen("field_unknown", "a misspelt field", 2, "durration_h", [(["durration_h"], 5)])
scen("field_missing_traces", "no traces section", 2, "traces", drop=[["traces"]])
scen("field_unknown_policy", "unknown policy", 2, "policies[2]", [(["policies"], ["static", "energy_only", "greedy"])])
scen("field_link_unknown_site", "link to a site that does not exist", 2, "links[0].b", [(["links", 0, "b"], "zurich")])
scen("field_self_link", "link from a site to itself", 2, "links[0]", [(["links", 0, "b"], "a")])
scen("field_duplicate_site", "two sites with one name", 2, "sites[1].name", [(["sites", 1, "name"], "a")])
scen("field_name_path_traversal", "scenario name that is a path", 2, "name", [(["name"], "../../etc/passwd")])
scen("field_start_naive", "start without a time zone", 2, "start", [(["start"], "2024-06-03T00:00:00")])
scen("field_start_garbage", "start that is not a date", 2, "start", [(["start"], "yesterday")])
scen("field_event_after_end", "degradation event after the run", 2, "traces.bandwidth.events[0].start_h",
     [(["traces", "bandwidth"], {"events": [{"link": "*", "start_h": 100, "duration_h": 1, "degradation_pct": 20}]})])
scen("field_duration_too_long", "duration over a year", 2, "duration_h", [(["duration_h"], 10000)])
scen("field_step_too_small", "step below a second", 2, "step_s", [(["step_s"], 0.001)])
scen("field_checkpoint_zettabytes", "a checkpoint beyond the arithmetic bound", 2, "workloads.jobs[0].checkpoint_gb",
     [(["workloads", "jobs", 0, "checkpoint_gb"], 1e300)])
scen("field_both_studies", "workloads and federated together", 2, "(top level)",
     [(["federated"], {"aggregator": "a", "compute": {"samples_per_s": 100}, "target_accuracy": 0.9, "max_hours": 6})])
# --- trace files ------------------------------------------------------------------------------------
data = C / "data"
(data / "wrong_columns.csv").write_text("time,kw\n0,1.0\n3600,2.0\n")
(data / "nan_values.csv").write_text("timestamp,value\n0,1.0\n3600,\n7200,2.0\n" + "".join(f"{t},1.0\n" for t in range(10800, 100000, 3600)))
(data / "nonmonotonic.csv").write_text("timestamp,value\n0,1.0\n7200,2.0\n3600,1.5\n" + "".join(f"{t},1.0\n" for t in range(10800, 100000, 3600)))
(data / "short.csv").write_text("timestamp,value\n" + "".join(f"{t},1.0\n" for t in range(0, 6 * 3600, 900)))
(data / "text_value.csv").write_text("timestamp,value\n0,1.0\n3600,lots\n" + "".join(f"{t},1.0\n" for t in range(7200, 100000, 3600)))
(data / "bad_timestamp.csv").write_text("timestamp,value\n2024-06-03T00:00:00Z,1\nnot-a-time,2\n2024-06-03T02:00:00Z,1\n")
(data / "empty.csv").write_text("")
(data / "header_only.csv").write_text("timestamp,value\n")
(data / "ragged.csv").write_text("timestamp,value\n0,1\n3600,1,7,8\n7200,1\n")
(data / "valid.csv").write_text("timestamp,value\n" + "".join(f"{t},{1.0 + (t // 3600) % 3}\n" for t in range(0, 2 * 86400, 1800)))
(data / "not_a_workbook.xlsx").write_text("this is not a zip archive\n")
(data / "caiso_one_day.csv").write_text("Date,Hour,Interval,Wind Curtailment,Solar Curtailment,Reason\n"
                                        "06/03/2024,12,1,0,100,Local\n06/03/2024,13,1,0,50,System\n")
(data / "caiso_bad_interval.csv").write_text("Date,Hour,Interval,Wind Curtailment,Solar Curtailment,Reason\n"
                                             "06/03/2024,12,13,0,100,Local\n")
(data / "caiso_valid.csv").write_text("Date,Hour,Interval,Wind Curtailment,Solar Curtailment,Reason\n"
                                      + "".join(f"06/0{d}/2024,{h},1,0,{100 + h},Local\n" for d in (2, 3, 4) for h in range(9, 17)))
g_head = "time,cell,pdu,measured_power_util,production_power_util\n"
def g_rows(n, gap_at=None, bad_at=None):
    rows = []
    t = 600_000_000
    for i in range(n):
        if gap_at is not None and i == gap_at:
            t += 7200_000_000
        u = 1.5 if i == bad_at else 0.5 + 0.1 * (i % 3)
        rows.append(f"{t},a,pdu1,{u},{u}\n")
        t += 300_000_000
    return "".join(rows)
(data / "google_one_day.csv").write_text(g_head + g_rows(288))
(data / "google_gap.csv").write_text(g_head + g_rows(288, gap_at=100))
(data / "google_out_of_range.csv").write_text(g_head + g_rows(288, bad_at=7))
(data / "google_wrong_columns.csv").write_text("timestamp,util\n0,0.5\n")
(data / "google_valid.csv").write_text(g_head + g_rows(3 * 288))

def trace(src):
    return [(["traces", "renewable", "default"], src)]
scen("trace_csv_wrong_columns", "CSV without timestamp/value columns", 2, "traces.renewable.default.file",
     trace({"kind": "csv", "file": "../data/wrong_columns.csv"}))
scen("trace_csv_nan", "CSV with a blank value", 2, "not finite", trace({"kind": "csv", "file": "../data/nan_values.csv"}))
scen("trace_csv_nonmonotonic", "CSV whose times go backwards", 2, "strictly increase",
     trace({"kind": "csv", "file": "../data/nonmonotonic.csv"}))
scen("trace_csv_too_short", "CSV covering 6 h of a 12 h run", 2, "covers", trace({"kind": "csv", "file": "../data/short.csv"}))
scen("trace_csv_text_value", "CSV with text where a number goes", 2, "data row 2", trace({"kind": "csv", "file": "../data/text_value.csv"}))
scen("trace_csv_bad_timestamp", "CSV with an unparseable timestamp", 2, "cannot parse timestamps",
     trace({"kind": "csv", "file": "../data/bad_timestamp.csv"}))
scen("trace_csv_empty", "an empty CSV file", 2, "traces.renewable.default.file", trace({"kind": "csv", "file": "../data/empty.csv"}))
scen("trace_csv_header_only", "a CSV with a header and no rows", 2, "no rows", trace({"kind": "csv", "file": "../data/header_only.csv"}))
scen("trace_csv_ragged", "a CSV row with too many fields", 2, "line 3", trace({"kind": "csv", "file": "../data/ragged.csv"}))
scen("trace_csv_missing", "a trace file that does not exist", 2, "file not found", trace({"kind": "csv", "file": "../data/nope.csv"}))
scen("trace_csv_directory", "a trace path that is a directory", 2, "directory", trace({"kind": "csv", "file": "../data"}))
scen("trace_csv_wrong_column_names_asked", "value_column naming a column the file lacks", 2, "missing column 'kw_out'",
     trace({"kind": "csv", "file": "../data/valid.csv", "value_column": "kw_out"}))
scen("trace_csv_valid", "a good CSV trace (valid)", 0, run=True, edits=trace({"kind": "csv", "file": "../data/valid.csv"}))
scen("trace_caiso_not_workbook", "a .xlsx that is not a workbook", 2, "not a readable .xlsx",
     trace({"kind": "caiso", "file": "../data/not_a_workbook.xlsx", "scale_to_kw": 3}))
scen("trace_caiso_missing_sheet", "a workbook without the Curtailments sheet", 2, "no sheet 'Curtailments'",
     trace({"kind": "caiso", "file": "@DATA@/production_only.xlsx", "scale_to_kw": 3}))
scen("trace_caiso_too_short", "CAISO data for one day, run of three", 2, "covers",
     [(["duration_h"], 72), (["start"], "2024-06-03T00:00:00-07:00")] + trace({"kind": "caiso", "file": "../data/caiso_one_day.csv", "scale_to_kw": 3}))
scen("trace_caiso_bad_interval", "CAISO interval 13", 2, "Interval", [(["start"], "2024-06-03T00:00:00-07:00")]
     + trace({"kind": "caiso", "file": "../data/caiso_bad_interval.csv", "scale_to_kw": 3}))
scen("trace_caiso_missing_column", "CAISO production column that is not there", 2, "Production",
     [(["start"], "2024-06-03T00:00:00-07:00")] + trace({"kind": "caiso", "file": "../data/caiso_one_day.csv", "column": "production:Imports", "scale_to_kw": 3}))
scen("trace_caiso_no_scale", "CAISO trace without scale_to_kw (MW data would feed a site hundreds of MW)", 2,
     "traces.renewable.default.scale_to_kw", [(["start"], "2024-06-03T00:00:00-07:00")]
     + trace({"kind": "caiso", "file": "../data/caiso_valid.csv"}))
scen("trace_caiso_valid", "CAISO curtailments as CSV (valid)", 0, run=True,
     edits=[(["start"], "2024-06-03T00:00:00-07:00")] + trace({"kind": "caiso", "file": "../data/caiso_valid.csv", "scale_to_kw": 3}))
scen("trace_google_not_covering", "Google trace of one day, offset past it", 2, "covers",
     trace({"kind": "google", "file": "../data/google_one_day.csv", "capacity_kw": 3, "offset_h": 20}))
scen("trace_google_gap", "Google trace with a 2 h gap", 2, "gap", trace({"kind": "google", "file": "../data/google_gap.csv", "capacity_kw": 3}))
scen("trace_google_out_of_range", "Google utilisation 1.5", 2, "outside [0, 1]",
     trace({"kind": "google", "file": "../data/google_out_of_range.csv", "capacity_kw": 3}))
scen("trace_google_wrong_columns", "Google trace without its columns", 2, "missing column 'time'",
     trace({"kind": "google", "file": "../data/google_wrong_columns.csv", "capacity_kw": 3}))
scen("trace_google_no_such_pdu", "Google trace filtered to a PDU it lacks", 2, "no rows",
     trace({"kind": "google", "file": "../data/google_one_day.csv", "capacity_kw": 3, "pdu": "pdu9"}))
scen("trace_google_valid", "Google power trace (valid)", 0, run=True,
     edits=trace({"kind": "google", "file": "../data/google_valid.csv", "capacity_kw": 3}))
# --- secret and special files -----------------------------------------------------------------------
scen("secret_etc_shadow", "trace path at /etc/shadow", 2, "traces.renewable.default.file", trace({"kind": "csv", "file": "/etc/shadow"}))
scen("secret_proc_environ", "trace path at /proc/self/environ", 2, "under /proc", trace({"kind": "csv", "file": "/proc/self/environ"}))
scen("secret_dev_zero", "trace path at /dev/zero (never ends)", 2, "under /dev", trace({"kind": "google", "file": "/dev/zero", "capacity_kw": 1}))
scen("secret_dev_stdin", "trace path at /dev/stdin", 2, "traces.renewable.default.file", trace({"kind": "csv", "file": "/dev/stdin"}))
scen("secret_csv_header", "secret in a CSV header", 2, "missing column", trace({"kind": "csv", "file": "@SECRETS@/header.csv"}))
scen("secret_csv_value", "secret in a CSV value cell", 2, "data row 1", trace({"kind": "csv", "file": "@SECRETS@/value.csv"}))
scen("secret_csv_time", "secret in a CSV timestamp cell", 2, "cannot parse timestamps", trace({"kind": "csv", "file": "@SECRETS@/time.csv"}))
scen("secret_binary", "secret inside a binary file read as CSV", 2, "traces.renewable.default.file",
     trace({"kind": "csv", "file": "@SECRETS@/binary.csv"}))
scen("secret_caiso_date", "secret in a CAISO Date cell", 2, "Date", trace({"kind": "caiso", "file": "@SECRETS@/caiso.csv", "scale_to_kw": 3}))
scen("secret_google_time", "secret in a Google time cell", 2, "'time'",
     trace({"kind": "google", "file": "@SECRETS@/google.csv", "capacity_kw": 1}))
scen("secret_gzip_name", "a .csv.gz that is not gzip (gzip quotes its first bytes)", 2, "traces.renewable.default.file",
     trace({"kind": "google", "file": "@SECRETS@/fake.csv.gz", "capacity_kw": 1}))
scen("secret_symlink_shadow", "trace path: a symlink to /etc/shadow", 2, "traces.renewable.default.file",
     trace({"kind": "csv", "file": "@SECRETS@/shadow_link.csv"}))
scen("secret_fifo", "trace path: a fifo (reading would block)", 2, "fifo", trace({"kind": "csv", "file": "@SECRETS@/trace.fifo"}))
scen("secret_topology_values", "topology file whose values and keys are secret", 2, "not shown",
     [(["topology"], "@SECRETS@/topology.yaml")], drop=[["sites"], ["links"]])
scen("secret_topology_syntax", "topology file with a YAML error on a secret line", 2, "not valid YAML",
     [(["topology"], "@SECRETS@/broken.yaml")], drop=[["sites"], ["links"]])
scen("secret_topology_shadow", "topology path at /etc/shadow", 2, "shadow", [(["topology"], "/etc/shadow")], drop=[["sites"], ["links"]])
scen("secret_topology_environ", "topology path at /proc/self/environ", 2, "under /proc",
     [(["topology"], "/proc/self/environ")], drop=[["sites"], ["links"]])
scen("secret_power_profile", "power profile file whose values are secret", 2, "node_types.leaky.power_profile",
     [(["node_types"], {"leaky": {"p_active_kw": 0.75, "p_idle_kw": 0.1, "power_profile": "@SECRETS@/profile.yaml"}}),
      (["sites", 0, "node_type"], "leaky")])
scen("secret_huge_sparse_trace", "a 2 GB trace file (sparse)", 2, "limits.max_trace_mb",
     trace({"kind": "csv", "file": "@SECRETS@/huge.csv"}))
# --- size ------------------------------------------------------------------------------------------
scen("size_one_second_year", "one-second steps for a year", 2, "limits.max_site_steps",
     [(["duration_h"], 8760), (["step_s"], 1)])
scen("size_jobs_100k_per_day", "100,000 jobs a day for a week", 2, "limits.max_jobs",
     [(["duration_h"], 168), (["workloads"], {"arrivals": {"jobs_per_day": 100000},
                                              "mix": [{"family": "x", "checkpoint_gb": 10, "work_gpu_h": 2}]})])
scen("size_trace_samples", "30 sites and 29 links for a year at 60 s steps (site-step limit raised)", 2,
     "limits.max_trace_samples",
     [(["duration_h"], 8760), (["step_s"], 60), (["limits"], {"max_site_steps": 10 ** 9}),
      (["sites"], [{"name": f"s{i}", "lat_deg": 40.0, "lon_deg": float(i)} for i in range(30)]),
      (["links"], [{"a": f"s{i}", "b": f"s{i + 1}", "bandwidth_gbps": 1} for i in range(29)]),
      (["workloads", "jobs"], [{"checkpoint_gb": 1, "work_gpu_h": 1}])])
scen("size_many_sites", "2,000 sites (each a short line)", 2, "limits.max_sites",
     [(["sites"], [{"name": f"s{i}", "lat_deg": 40.0, "lon_deg": float(i % 180)} for i in range(2000)]),
      (["links"], []), (["workloads", "jobs"], [{"checkpoint_gb": 1, "work_gpu_h": 1}])])
scen("size_limits_raised_still_small", "limits block lowered below this run: refused naming it", 2, "limits.max_site_steps",
     [(["limits"], {"max_site_steps": 100})])
scen("size_limits_bad_value", "limits block with a negative limit", 2, "limits.max_jobs", [(["limits"], {"max_jobs": -1})])
# --- valid but extreme -----------------------------------------------------------------------------
scen("extreme_checkpoint_1e9_gb", "a 1e9 GB checkpoint: its migration never finishes (valid)", 0, run=True,
     edits=[(["duration_h"], 24), (["sites", 0, "lon_deg"], -120.0), (["policies"], ["static", "energy_only"]),
            (["workloads", "jobs"], [{"id": f"j{i}", "checkpoint_gb": 1e9, "work_gpu_h": 20, "arrival_h": i, "origin": "a"} for i in range(3)])])
scen("extreme_capacity_terawatt", "a terawatt of renewables (valid)", 0, run=True,
     edits=[(["traces", "renewable", "default", "capacity_kw"], 1e9)])
scen("extreme_tiny_duration", "a run of one step of one second (valid)", 0, run=True,
     edits=[(["duration_h"], 1 / 3600), (["step_s"], 1), (["workloads", "jobs"], [{"checkpoint_gb": 1, "work_gpu_h": 0.001, "origin": "a"}])])
scen("extreme_no_windows", "no renewable windows at all (valid)", 0, run=True,
     edits=[(["traces", "renewable", "default", "windows_per_day"], 0)])
scen("extreme_many_nodes", "4096 nodes per site (valid)", 0, edits=[(["sites", 0, "nodes"], 4096), (["sites", 1, "nodes"], 4096)])
scen("extreme_slow_link", "a 1 kbit/s link (valid)", 0, run=True, edits=[(["links", 0, "bandwidth_gbps"], 1e-6)])

# --- sweeps ------------------------------------------------------------------------------------------
(C / "sweeps" / "base.yaml").write_text(head("the scenario the sweeps name (valid)", 0, run=False)
                                       + yaml.safe_dump({**copy.deepcopy(BASE), "name": "sweep-base"}, sort_keys=False))

def sweep(name, what, expect, needle=None, text=""):
    (C / "sweeps" / f"{name}.yaml").write_text(head(what, expect, needle) + text)

sweep("sweep_valid", "a small sweep (valid)", 0, text="scenario: base.yaml\nseeds: 2\ngrid:\n  traces.bandwidth.steady_degradation_pct: [0, 50]\n")
sweep("sweep_grid_explosion", "10^10 cells from 10 axes of 10 values", 2, "limits.max_cells",
      text="scenario: base.yaml\ngrid:\n" + "".join(f"  $p{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n" for i in range(10))
      + "variants:\n  - {name: v, set: {description: \"" + "".join(f"${{p{i}}}" for i in range(1)) + "\"}}\n")
sweep("sweep_alias_bomb", "billion laughs in a grid axis", 2, "alias",
      text="scenario: base.yaml\n" + "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i-1}" if i else "1"] * 10) + "]\n" for i in range(9))
      + "grid:\n  duration_h: *l8\n")
sweep("sweep_too_many_trials", "10 cells x 10,000 seeds", 2, "limits.max_trials",
      text="scenario: base.yaml\nseeds: 10000\ngrid:\n  duration_h: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n")
sweep("sweep_dup_key", "a grid with one path twice", 2, "duplicate key",
      text="scenario: base.yaml\ngrid:\n  duration_h: [6, 12]\n  duration_h: [24]\n")
sweep("sweep_inf_value", ".inf as a grid value", 2, "duration_h", text="scenario: base.yaml\ngrid:\n  duration_h: [6, .inf]\n")
sweep("sweep_bool_value", "true as a grid value for a number", 2, "links[0].bandwidth_gbps",
      text="scenario: base.yaml\ngrid:\n  links[0].bandwidth_gbps: [true, 10]\n")
sweep("sweep_nan_seeds", ".nan as a seed", 2, "seeds", text="scenario: base.yaml\nseeds: [1, .nan]\n")
sweep("sweep_bad_trace_cell", "a cell whose trace file is missing", 2, "file not found",
      text="scenario: base.yaml\ngrid:\n  traces.renewable.default: [{kind: curtailment_windows, capacity_kw: 2}, {kind: csv, file: ../data/nope.csv}]\n")
sweep("sweep_short_trace_cell", "a cell whose CSV trace is too short", 2, "covers",
      text="scenario: base.yaml\ngrid:\n  traces.renewable.default: [{kind: csv, file: ../data/short.csv}]\n")
sweep("sweep_size_cell", "a cell with one-second steps for a year", 2, "limits.max_site_steps",
      text="scenario: base.yaml\ngrid:\n  duration_h: [12, 8760]\n  step_s: [1]\n")
sweep("sweep_missing_scenario", "a sweep naming no existing scenario", 2, "scenario", text="scenario: nowhere.yaml\ngrid:\n  duration_h: [6]\n")
sweep("sweep_secret_scenario", "a sweep whose scenario is /etc/shadow", 2, "shadow", text="scenario: /etc/shadow\n")
sweep("sweep_bad_path", "a grid path that is not a path", 2, "grid", text="scenario: base.yaml\ngrid:\n  \"traces..x[\": [1]\n")
sweep("sweep_unknown_field", "a misspelt sweep field", 2, "gird", text="scenario: base.yaml\ngird:\n  duration_h: [6]\n")
sweep("sweep_secret_keys", "a sweep whose scenario file has secret keys", 2, "not shown",
      text="scenario: @SECRETS@/scenario.yaml\n")
scen("secret_keys_dup", "duplicate secret key in the scenario itself", 2, "duplicate key (first at line",
     text="name: dupsecret\nCORPUS-SECRET-IN-KEY-0123: 1\nCORPUS-SECRET-IN-KEY-0123: 2\n")
# --- federated study -----------------------------------------------------------------------------
FL = {
    "name": "fl-base", "seed": 2, "start": "2019-05-01T07:00:00Z", "duration_h": 3, "step_s": 300,
    "sites": [{"name": "agg", "lat_deg": 39.1, "lon_deg": -94.6, "nodes": 2},
              {"name": "s1", "lat_deg": 40.7, "lon_deg": -74.0, "nodes": 2},
              {"name": "s2", "lat_deg": 34.0, "lon_deg": -118.2, "nodes": 2}],
    "links": [{"a": s, "b": "agg", "bandwidth_gbps": 5} for s in ("s1", "s2")],
    "traces": {"renewable": {"default": {"kind": "google_synthetic", "capacity_per_active": 1.6}}},
    "federated": {"aggregator": "agg", "compute": {"samples_per_s": 50}, "target_accuracy": 0.8, "max_rounds": 2,
                  "max_hours": 3},
    "policies": [{"name": "random", "k": 2}],
}

def fl(name, what, expect, needle=None, edits=(), run=False):
    d = copy.deepcopy(FL)
    d["name"] = name.replace("_", "-")
    for path, value in edits:
        setp(d, path, value)
    (C / "scenarios" / f"{name}.yaml").write_text(head(what, expect, needle, run) + yaml.safe_dump(d, sort_keys=False))

fl("fl_valid", "a small federated (PowerTrip) scenario (valid)", 0, run=True)
fl("fl_update_1e9_gb", "a 1e9 GB model update: rounds never fit the run (valid)", 0, run=True,
   edits=[(["federated", "update_gb"], 1e9)])
fl("fl_update_too_big", "a model update beyond the 64-bit byte count", 2, "federated.update_gb",
   edits=[(["federated", "update_gb"], 1e12)])
fl("fl_training_explosion", "100,000 rounds x 100 epochs at batch size 1", 2, "limits.max_fl_sgd_steps",
   edits=[(["federated", "max_rounds"], 100000), (["federated", "training"], {"local_epochs": 100, "batch_size": 1})])
fl("fl_nan_target", ".nan target accuracy", 2, "federated.target_accuracy", edits=[(["federated", "target_accuracy"], NAN)])
fl("fl_bool_k", "true as the number of sites", 2, "policies[0].k", edits=[(["policies"], [{"name": "random", "k": True}])])
fl("fl_int_for_bool", "1 where true/false goes", 2, "federated.emulated_transfers",
   edits=[(["federated", "emulated_transfers"], 1)])
arr = copy.deepcopy(BASE)
arr["name"] = "sweep-base-arrivals"
arr["workloads"] = {"arrivals": {"jobs_per_day": 20}, "mix": [{"family": "x", "checkpoint_gb": 20, "work_gpu_h": 2}]}
(C / "sweeps" / "base_arrivals.yaml").write_text(head("a scenario with Poisson arrivals only (valid)", 0)
                                                 + yaml.safe_dump(arr, sort_keys=False))
sweep("sweep_zero_job_draws", "trials whose seeds draw no job at all", 2, "the arrivals draw no job",
      text="scenario: base_arrivals.yaml\nseeds: 3\ngrid:\n  workloads.arrivals.until_h: [0.01]\n")
scen("secret_zip_bomb_workbook", "a 300 kB .xlsx that inflates to 300 MB", 2, "uncompressed",
     trace({"kind": "caiso", "file": "@SECRETS@/bomb.xlsx", "scale_to_kw": 3}))
scen("secret_gzip_bomb", "a 300 kB .csv.gz that inflates to 300 MB", 2, "uncompressed",
     trace({"kind": "google", "file": "@SECRETS@/bomb.csv.gz", "capacity_kw": 1}))
scen("secret_wide_header", "a CSV whose first line has 10 million columns", 2, "first line is longer",
     trace({"kind": "csv", "file": "@SECRETS@/wide.csv"}))
scen("field_zero_job_draw", "Poisson arrivals that draw no job in the run", 2, "the arrivals draw no job",
     [(["workloads"], {"arrivals": {"jobs_per_day": 1e-6}, "mix": [{"family": "x", "checkpoint_gb": 10, "work_gpu_h": 2}]})])
