"""Reading metric histories from CSV and JSON lines, and every kind of bad input."""

import gzip
import json
import math
import re

import pytest

from diagnostics import load_series

CSV = """step,train/success,actor/grad_norm
0,0.1,1.5
2,,NaN
1,0.3,inf
"""


def test_csv_rows_sorted_with_empty_cells_missing_and_nan_inf_numbers():
    series = load_series(CSV)
    assert [step for step, _ in series] == [0, 1, 2]
    assert series[0] == (0, {"train/success": 0.1, "actor/grad_norm": 1.5})
    assert series[1][1]["actor/grad_norm"] == math.inf
    assert set(series[2][1]) == {"actor/grad_norm"} and math.isnan(series[2][1]["actor/grad_norm"])


def test_jsonl_with_null_bare_nan_and_quoted_inf():
    text = '{"step": 0, "grad_norm": NaN, "reward": null}\n\n{"step": 1, "grad_norm": "-Infinity", "reward": 1}\n'
    series = load_series(text)
    assert math.isnan(series[0][1]["grad_norm"]) and "reward" not in series[0][1]
    assert series[1] == (1, {"grad_norm": -math.inf, "reward": 1.0})


@pytest.mark.parametrize(
    "text",
    [
        "Wall time,Step,Value\n1700000000.5,0,0.25\n1700000001.5,1,0.5\n",  # TensorBoard's CSV export
        "_step,Value\n0,0.25\n1,0.5\n",  # W&B's history
        "global_step\tValue\n0\t0.25\n1\t0.5\n",  # Hugging Face's name, tab-separated
        '{"_step": 0, "Value": 0.25}\n{"_step": 1, "Value": 0.5}\n',
    ],
)
def test_the_step_under_other_tools_names_is_read_as_the_step(text):
    # Refused before with "no 'step' column": a tester's exports from TensorBoard and W&B
    series = load_series(text)
    assert [(step, values["Value"]) for step, values in series] == [(0, 0.25), (1, 0.5)]
    assert all("step" not in values and "_step" not in values for _, values in series)


def test_reads_a_path_and_takes_an_explicit_format(tmp_path):
    path = tmp_path / "metrics.log"
    path.write_text('{"step": 3, "x": 1}\n')
    assert load_series(path, fmt="jsonl") == [(3, {"x": 1.0})]
    assert load_series(str(path)) == [(3, {"x": 1.0})]
    with pytest.raises(ValueError, match="format: 'xml' is not 'csv' or 'jsonl'"):
        load_series(path, fmt="xml")


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "step,actor/grad_norm\n0,1\n1,2\n2,3\n3,4\n4,5\n5,6\n6,abc\n",
            "line 8, column 'actor/grad_norm': 'abc' is not a number",
        ),
        (
            "epoch,loss\n0,1\n",
            "line 1: no 'step' column, nor one of _step, global_step in any case (columns: epoch, loss)",
        ),
        ("Step,_step,a\n0,0,1\n", "line 1: no 'step' column"),  # two candidates: neither is taken
        ("step,a\n0,1\n1,2\n0,3\n", "line 4: step 0, column 'a' is 3.0 here but 1.0 on line 2"),
        ("step,a,b\n0,1,\n0,,2\n0,3,\n", "line 4: step 0, column 'a' is 3.0 here but 1.0 on line 2"),
        # The line that gave the column its value, not the step's first line (2, which has no b).
        (
            "step,a,b\n5,1,\n6,1,\n5,,2\n7,1,\n5,,3\n",
            "line 6: step 5, column 'b' is 3.0 here but 2.0 on line 4",
        ),
        ("step,a\n0,1e400\n", "line 2, column 'a': '1e400' is beyond a 64-bit float's range"),
        # float() reads these as 15.0, 3.0 and 10; a file means none of them
        ("step,a\n0,1_5\n", "line 2, column 'a': '1_5' is not a number"),
        ("step,a\n0,\u0663\n", "line 2, column 'a': '\u0663' is not a number"),
        ("step,a\n1_0,1\n", "line 2, column 'step': '1_0' is not a number"),
        ('{"step": 0, "a": -1E+999}\n', "line 1: '-1E+999' is beyond a 64-bit float's range"),
        ("step,a\n0,1\n1.5,2\n", "line 3, column 'step': 1.5 is not a whole step number"),
        ("step,a\n0,1\n-5,2\n", "line 3, column 'step': -5 is not a whole step number"),  # not -5.0
        ("step,a\n0,1\n,2\n", "line 3, column 'step': empty"),
        ("step,a\n0,1,2\n", "line 2: 3 cells, the header has 2"),
        ("step,a,a\n0,1,2\n", "line 1: column 'a' appears twice"),
        ("step,,b\n0,1,2\n", "line 1, column 2: empty column name"),
        ("\n", "line 1: empty file"),
        ('step,"a\n0,1\n', 'line 1: a quoted cell opened on this line is never closed (a " missing'),
        ('step,a\n0,1\n1,"2\n2,3\n4,5\n', "line 3: a quoted cell opened on this line is never closed"),
        ('step,a\n0,"1"x\n', "line 2: ',' expected after '\"'"),
        ('{"step": 0}\n{"step": 1, "a": "abc"}\n', "line 2, column 'a': 'abc' is not a number"),
        ('{"step": 0}\n{"step": 1, "a": true}\n', "line 2, column 'a': True is not a number"),
        # In JSON, as the ingest API has it: a number is bare, the only strings are NaN and the infinities.
        ('{"step": 0, "a": "1.5"}\n', "line 1, column 'a': '1.5' is not a number (a number is written bare"),
        ('{"step": 0, "a": "-inf"}\n', "line 1, column 'a': '-inf' is not a number"),
        ('{"step": 0, "a": "nan"}\n', "line 1, column 'a': 'nan' is not a number"),
        ('{"step": "3", "a": 1}\n', "line 1, key 'step': '3' is a string, not a number"),
        ('{"step": 0, "a": 1}\n{"step": 0, "step": 1, "a": 1}\n', "line 2: key 'step' appears twice"),
        ('[{"step": 0, "a": 1}, {"step": 1, "a": 1, "a": 2}]', "line 2: key 'a' appears twice"),
        (
            '{"log_history": [{"step": 0, "a": 1}], "log_history": []}',
            "key 'log_history' appears twice in the trainer state",
        ),
        ('{"step": 0}\n{"step": 1, "a": [1]}\n', "line 2, column 'a': [1] is not a number"),
        ('{"step": 0}\n{"a": 1}\n', "line 2: no 'step' key"),
        ('{"step": 0}\n[1, 2]\n', "line 2: expected a JSON object, got list"),
        ('{"step": 0}\n{"step": 1,\n', "line 2: not JSON"),
        ('{"step": -1}\n', "line 1, key 'step': -1 is not a whole step number"),
        (
            '{"step": 0, "a": 1}\n{"step": 0, "a": 2}\n',
            "line 2: step 0, column 'a' is 2.0 here but 1.0 on line 1",
        ),
        (
            '{"step": 1, "x": 1}\n{"step": 2, "x": 1}\n{"step": 1, "y": 2}\n{"step": 1, "y": 3}\n',
            "line 4: step 1, column 'y' is 3.0 here but 2.0 on line 3",
        ),
        (
            '{\n  "global_step": 3\n}\n',
            "a JSON document, but not JSON lines (one object per line) nor a trainer",
        ),
        ('[{"step": 0, "a": 1}, {"a": 2}]', "line 2: no 'step' key"),
    ],
)
def test_bad_input_names_the_line_and_column(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        load_series(text)


def test_rows_of_one_step_merge_and_infinity_written_as_such_is_a_number():
    # A trainer's log history: a training row and an evaluation row at the same step.
    text = "step,loss,reward,eval_reward\n10,0.5,0.3,\n10,,,0.4\n20,inf,1e300,-Infinity\n"
    assert load_series(text) == [
        (10, {"loss": 0.5, "reward": 0.3, "eval_reward": 0.4}),
        (20, {"loss": math.inf, "reward": 1e300, "eval_reward": -math.inf}),
    ]
    assert load_series('{"step": 1, "a": 1e300, "b": "-Infinity"}\n{"step": 1, "c": 2}\n') == [
        (1, {"a": 1e300, "b": -math.inf, "c": 2.0})
    ]


def test_binary_and_non_utf8_are_rejected(tmp_path):
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"PK\x03\x04\x00\x00")
    with pytest.raises(ValueError, match="not CSV or JSON lines: the data is binary"):
        load_series(binary)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("step,caf\xe9\n0,1\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"not UTF-8 text \(byte 8\)"):
        load_series(latin)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_text_with_its_byte_order_mark_is_read(tmp_path, encoding):
    # A spreadsheet's "Unicode text" export: it was refused as binary (its NUL bytes)
    path = tmp_path / "sheet.csv"
    path.write_bytes("\ufeffstep,train/success\r\n0,0.5\r\n1,0.75\r\n".encode(encoding))
    assert load_series(path) == [(0, {"train/success": 0.5}), (1, {"train/success": 0.75})]
    path.write_bytes(b"\xff\xfe\x00\xd8a\x00")  # a lone surrogate after the mark
    with pytest.raises(ValueError, match=r"not UTF-16 text after its byte order mark \(byte 2\)"):
        load_series(path)


def test_size_limit(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("step,a\n" + "".join(f"{i},1\n" for i in range(1000)))
    assert len(load_series(path, max_bytes=100_000)) == 1000
    with pytest.raises(ValueError, match="over the limit of 1000"):
        load_series(path, max_bytes=1000)
    with pytest.raises(ValueError, match="over the limit of 1000"):
        load_series(path.read_text(), max_bytes=1000)


def test_a_file_with_cr_line_endings_is_read(tmp_path):
    """As an old Mac program writes it: the csv module's own error asked for "universal-newline mode"."""
    path = tmp_path / "mac.csv"
    path.write_bytes(b"step,a\r0,1\r1,2\r")
    assert load_series(path) == [(0, {"a": 1.0}), (1, {"a": 2.0})]
    path.write_bytes(b"step,a\r0,1\r1,x\r")
    with pytest.raises(ValueError, match=re.escape("line 3, column 'a': 'x' is not a number")):
        load_series(path)


def test_a_csv_separated_by_semicolons_says_so():
    # Excel's in locales that write 0,5: read as commas, the number would be two cells
    text = "step;a;b\n0;0,5;1\n"
    hint = "; the file seems to separate its columns with ';': commas (or tabs) are read"
    with pytest.raises(ValueError, match=re.escape(hint)):
        load_series(text, fmt="csv")


def test_a_tab_separated_file_is_read(tmp_path):
    # A spreadsheet's "Unicode text" export: UTF-16 with its byte order mark, columns between tabs
    path = tmp_path / "sheet.txt"
    path.write_bytes("\ufeffstep\ttrain/success\tnote,x\r\n0\t0.5\t1\r\n1\t0.75\t2\r\n".encode("utf-16-le"))
    assert load_series(path, fmt="csv") == [
        (0, {"train/success": 0.5, "note,x": 1.0}),
        (1, {"train/success": 0.75, "note,x": 2.0}),
    ]
    with pytest.raises(ValueError, match=re.escape("line 2, column 'a': '0,5' is not a number")):
        load_series("step\ta\n0\t0,5\n", fmt="csv")


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"step": 0, "a": 1%s}', "line 1, column 'a': an integer of 5001 digits is too large"),
        ('{"step": -1%s, "a": 1}', "line 1, key 'step': an integer of 5001 digits is too large"),
        ('{"step": 0, "a": [1%s]}', "line 1: an integer of more than 4300 digits is too large"),
    ],
)
def test_an_integer_longer_than_python_converts_is_named_as_such(line, message):
    """Not the interpreter's own error, which asks to call sys.set_int_max_str_digits()."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        load_series(line % ("0" * 5000) + "\n", fmt="jsonl")


@pytest.mark.parametrize(
    "line", ['{"step": 0, "a": 1}', '{"step":0,"a":1}']
)  # compact: the CSV reader's own error
def test_json_lines_read_as_csv_say_so(line):
    with pytest.raises(ValueError, match="it looks like JSON lines: read it as jsonl"):
        load_series(line + "\n", fmt="csv")


def test_a_column_given_again_with_the_same_value_merges():
    # Hugging Face writes `epoch` in the training row and in the evaluation row of a step.
    text = "step,epoch,loss,eval_loss\n5,0.5,1.2,\n5,0.5,,1.4\n6,nan,1,\n6,nan,,2\n"
    series = load_series(text)
    assert series[0] == (5, {"epoch": 0.5, "loss": 1.2, "eval_loss": 1.4})
    assert (
        series[1][1]["loss"] == 1.0 and series[1][1]["eval_loss"] == 2.0 and math.isnan(series[1][1]["epoch"])
    )


TRAINER_STATE = {
    "best_metric": None,
    "epoch": 1.0,
    "global_step": 10,
    "log_history": [
        {"epoch": 0.5, "grad_norm": 1.5, "learning_rate": 1e-5, "loss": 0.7, "step": 5},
        {"epoch": 0.5, "eval_loss": 0.9, "eval_runtime": 1.2, "step": 5},
        {"epoch": 1.0, "loss": 0.6, "reward": 0.25, "step": 10},
        {"epoch": 1.0, "step": 10, "total_flos": 0.0, "train_loss": 0.65},
    ],
}


@pytest.mark.parametrize("indent", [2, None])
def test_a_trainer_state_json_is_read_as_its_log_history(tmp_path, indent):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(TRAINER_STATE, indent=indent) + "\n")
    assert load_series(path) == [
        (
            5,
            {
                "epoch": 0.5,
                "grad_norm": 1.5,
                "learning_rate": 1e-5,
                "loss": 0.7,
                "eval_loss": 0.9,
                "eval_runtime": 1.2,
            },
        ),
        (10, {"epoch": 1.0, "loss": 0.6, "reward": 0.25, "total_flos": 0.0, "train_loss": 0.65}),
    ]
    state = {**TRAINER_STATE, "log_history": [*TRAINER_STATE["log_history"], {"epoch": 1.0, "loss": 0.5}]}
    path.write_text(json.dumps(state, indent=indent))
    with pytest.raises(ValueError, match="line 5: no 'step' key"):  # line N: the Nth entry
        load_series(path)


def test_a_json_list_of_objects_is_read_as_its_records():
    assert load_series('[{"step": 1, "a": 0.5}, {"step": 0, "a": 0.25}]') == [
        (0, {"a": 0.25}),
        (1, {"a": 0.5}),
    ]
    assert load_series('{"step": 3, "a": 1}') == [(3, {"a": 1.0})]  # one line of JSON lines


def test_gzip_files_are_read_and_bounded(tmp_path):
    path = tmp_path / "metrics.csv.gz"
    path.write_bytes(gzip.compress(b"step,a\n0,1\n") + gzip.compress(b"1,2\n"))  # two members, as cat makes
    assert load_series(path) == [(0, {"a": 1.0}), (1, {"a": 2.0})]
    path.write_bytes(gzip.compress(b"step,a\n" + b"0,1\n" * 10_000))  # 40 kB of text in a small file
    with pytest.raises(ValueError, match="over the limit of 1,000 bytes once decompressed"):
        load_series(path, max_bytes=1000)
    path.write_bytes(gzip.compress(b"step,a\n0,1\n")[:-10])
    with pytest.raises(ValueError, match="gzip: the file ends before its compressed data does"):
        load_series(path)
