"""The extension is built against CPython's stable ABI (nanobind's abi3 build, Py_LIMITED_API 3.12) on
Python 3.12 and later, but CI builds it on 3.11 without the limited API, so a call outside it compiles
here and breaks every 3.12 wheel build (session 35: PyTuple_GET_ITEM and PyUnicode_AsUTF8). This scans
the binding sources for the calls that are not in the 3.12 limited API."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Not in the limited API as of 3.12: the unchecked accessor macros (PyTuple_GET_ITEM, PyList_SET_ITEM,
# PyBytes_AS_STRING, PyFloat_AS_DOUBLE, ...), CPython's private names, and these functions.
MACRO = re.compile(r"\bPy[A-Z][A-Za-z]*_[A-Z][A-Z_]+\b")
PRIVATE = re.compile(r"\b_Py[A-Za-z_]+\b")
FUNCTIONS = re.compile(r"\bPyUnicode_AsUTF8\s*\(")  # PyUnicode_AsUTF8AndSize is in it
ALLOWED = {"PY_VECTORCALL_ARGUMENTS_OFFSET"}


def code_lines(path):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        code = line.split("//", 1)[0]
        if code.strip():
            yield n, code


def test_bindings_stay_in_the_limited_api():
    sources = sorted((ROOT / "cpp" / "bindings").glob("*.[ch]*"))
    assert sources, "no binding sources found"
    bad = []
    for path in sources:
        for n, code in code_lines(path):
            for rx in (MACRO, PRIVATE, FUNCTIONS):
                for m in rx.finditer(code):
                    name = m.group(0).rstrip("( \t")
                    if name not in ALLOWED:
                        bad.append(f"{path.relative_to(ROOT)}:{n}: {name}")
    assert not bad, "calls outside the Python 3.12 limited API (use the checked functions):\n" + "\n".join(bad)


def test_the_scan_catches_what_broke_the_build():
    caught = [rx.search(s) for s, rx in (("nb::handle a(PyTuple_GET_ITEM(args.ptr(), i));", MACRO),
                                          ("const char* n = PyUnicode_AsUTF8(key);", FUNCTIONS),
                                          ("x = _PyObject_Vectorcall(f, a, n, k);", PRIVATE))]
    assert all(caught)
    assert not FUNCTIONS.search("PyUnicode_AsUTF8AndSize(key, nullptr)")
