"""Whether a hint gives an exercise's answer away: it holds a line of the reference solution's code.

A hint names the clause that failed and what was observed; it never prints code that solves the exercise.
"Holds a line" is read loosely, since a hint rewrites what it quotes: the solution's statements (and the
right-hand sides of its assignments) between `# BEGIN SOLUTION` and `# END SOLUTION` become tokens, with
comments dropped, string literals in one quoting and module prefixes (`torch.`, `tl.`, ...) dropped. A hint
holds a statement of 8 tokens or more when some stretch of its own tokens, 2 longer than the statement,
holds 80% of the statement's tokens in order; one of 5 to 7 tokens, only verbatim. So
`einsum('hc,hvc->hv', latent output, w_uv)` holds `out[b] = torch.einsum("hc,hvc->hv", latent_out, w_uv)`:
7 of its right-hand side's 8 tokens. A statement that the stub already states (the contract in its
docstring) gives nothing away and is not counted.
"""
from __future__ import annotations

import ast
import difflib
import functools
import io
import re
import tokenize
from collections import Counter

MIN_TOKENS = 5                        # shorter statements (`return out`, `n = len(rows)`) are not the answer
LOOSE_TOKENS = 8                      # from this length on, a statement is held loosely; before, verbatim
SHARE = 0.8                           # of a statement's tokens, in order, that make a hint hold it
SLACK = 2                             # a hint's stretch may be this many tokens longer than the statement
PREFIXES = {"torch", "tl", "np", "math", "triton", "F"}
HINT_TOKEN = re.compile(r"""[A-Za-z_]\w*|\d+(?:\.\d+)?(?:e-?\d+)?|'[^'\s]*'|"[^"\s]*"|\.\.\.|\*\*|//|->"""
                        r"""|[-+*/%@<>=!]=?|[()\[\]{},:.]""")


def quoted(literal: str) -> str:
    """A string literal in one quoting, 'value' (a literal that does not evaluate stays as written)."""
    try:
        return f"'{ast.literal_eval(literal)}'"
    except (ValueError, SyntaxError):
        return literal


def without_prefixes(tokens: list) -> list:
    """`torch . einsum` -> `einsum`: a hint may name a function with or without its module."""
    out = []
    for i, token in enumerate(tokens):
        if token in PREFIXES and tokens[i + 1: i + 2] == ["."]:
            continue
        if token == "." and i and tokens[i - 1] in PREFIXES:
            continue
        out.append(token)
    return out


def text_tokens(text: str) -> list:
    """The code-like tokens of prose (a hint, a stub): names, numbers, unspaced quoted strings, operators."""
    return without_prefixes([quoted(t) if t[0] in "'\"" else t for t in HINT_TOKEN.findall(text)])


def solution_statements(source: str) -> list:
    """The token lists of the statements between BEGIN / END SOLUTION markers, and of their assignments'
    right-hand sides, of MIN_TOKENS or more."""
    inside, solving = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        if line.strip() in ("# BEGIN SOLUTION", "# END SOLUTION"):
            solving = line.strip() == "# BEGIN SOLUTION"
        elif solving:
            inside.add(number)
    statements, current = [], []
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if current and current[0][0] in inside:
                statements.append(without_prefixes([text for _, text in current]))
            current = []
        elif token.type not in skip:
            text = quoted(token.string) if token.type == tokenize.STRING else token.string
            current.append((token.start[0], text))
    found = []
    for tokens in statements:
        found.append(tokens)
        assigned = [i for i, t in enumerate(tokens) if t in ("=", "+=", "-=", "*=", "/=", "//=")]
        if assigned:
            found.append(tokens[assigned[0] + 1:])
    return [tokens for tokens in found if len(tokens) >= MIN_TOKENS]


def holds(text_toks: list, statement: list, counts: Counter | None = None) -> bool:
    """Whether `text_toks` holds `statement`: verbatim when it is short, else SHARE of its tokens in order
    within a stretch SLACK tokens longer (`counts`: the Counter of `text_toks`, when already made)."""
    n = len(statement)
    if n < LOOSE_TOKENS:
        return any(text_toks[i: i + n] == statement for i in range(len(text_toks) - n + 1))
    need = SHARE * n
    wanted = token_counts(tuple(statement))
    counts = Counter(text_toks) if counts is None else counts
    if sum(min(k, counts[token]) for token, k in wanted.items()) < need:
        return False
    width = n + SLACK
    window, shared = Counter(), 0          # the stretch's tokens, how many of them the statement has
    for end, token in enumerate(text_toks):
        if window[token] < wanted[token]:
            shared += 1
        window[token] += 1
        if end >= width:                   # the token leaving the stretch
            gone = text_toks[end - width]
            window[gone] -= 1
            if window[gone] < wanted[gone]:
                shared -= 1
        if shared >= need:                 # enough tokens in the stretch: are enough in order?
            stretch = text_toks[max(0, end - width + 1): end + 1]
            blocks = difflib.SequenceMatcher(None, statement, stretch, autojunk=False).get_matching_blocks()
            if sum(b.size for b in blocks) >= need:
                return True
    return False


@functools.cache
def token_counts(statement: tuple) -> Counter:
    return Counter(statement)


def answer_lines(solution: str, stub: str) -> list:
    """The solution's statements that its stub does not already state: what a hint must not hold."""
    stub_toks = text_tokens(stub)
    return [s for s in solution_statements(solution) if not holds(stub_toks, s)]


@functools.cache
def answer_lines_of(exercise_id: int) -> list:
    """answer_lines of exercise `exercise_id`'s reference solution and the stub made from it."""
    from pagedkv_lib.judge.registry import get
    from pagedkv_lib.judge.stubs import make_stub

    text = get(exercise_id).solution_path.read_text()
    return answer_lines(text, make_stub(text, exercise_id))


def leaks(hint: str, lines: list) -> list:
    """The answer lines (as text) that `hint` holds."""
    toks = text_tokens(hint)
    if len(toks) < MIN_TOKENS:
        return []
    counts = Counter(toks)
    return [" ".join(line) for line in lines if holds(toks, line, counts)]


def module_strings(source: str) -> list:
    """Every string a module can put in a hint or a message: its string constants and f-strings (a
    formatted value as ⋯), docstrings left out."""
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    fstrings = [node for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)]
    inside_fstrings = {id(v) for node in fstrings for v in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            found.append("".join(v.value if isinstance(v, ast.Constant) else " ⋯ " for v in node.values))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and id(node) not in inside_fstrings):
            found.append(node.value)
    return list(dict.fromkeys(found))
