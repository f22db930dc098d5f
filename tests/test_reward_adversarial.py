"""What each correctness reward pays the completions a policy finds when it optimises that reward.

One table per reward. A row is a completion, the row's gold (or tests) and the score the reward must give,
with the reason as the test id. Every row is scored as a string and as a chat completion, which must agree.
"""

import hashlib

import pytest

from rewards import exact_match_reward, int_answer_reward, math_equivalence_reward, multiple_choice_reward, numeric_correctness_reward
from rewards.code import CodeExecutionReward

pytestmark = pytest.mark.stack_free  # nothing here reaches transformers, TRL, PEFT or datasets


def row(gold, completion, expected, why):
    return pytest.param(gold, completion, expected, id=why)


def both_formats(reward, completion, **columns):
    """The reward's score for ``completion`` as a string and as a chat message; they must be equal."""
    chat = [{"role": "assistant", "content": completion}]
    plain, as_chat = reward(prompts=None, completions=[completion, chat], **{k: [v, v] for k, v in columns.items()})
    assert plain == as_chat, "string and chat completions must score the same"
    return plain


EVERY_NUMBER = "<answer>" + " ".join(str(n) for n in range(1, 101)) + "</answer>"
PROMPT_WITH_EXAMPLE = "What is 6 times 7? Reply as <answer>N</answer>, for example <answer>42</answer>."
RUNAWAY_NUMBER = "<answer>" + "9" * 5_000 + "</answer>"

EXACT = [
    row("Paris", "<answer>Paris</answer>", 2.0, "the gold itself pays"),
    row("Paris", "<answer> paris. </answer>", 2.0, "case, spacing and a final period are formatting"),
    row("Paris", "<answer>risaP</answer>", 0.0, "permuted letters spell another word"),
    row("forty two", "<answer>two forty</answer>", 0.0, "permuted words are another answer"),
    row("42", "<answer>24</answer>", 0.0, "permuted digits are another number"),
    row("100", EVERY_NUMBER, 0.0, "every number listed is no answer"),
    row("4", "<answer>4 or 5</answer>", 0.0, "two answers in one tag are a hedge"),
    row("5", r"The answer: \boxed{4} \boxed{5}", 0.0, "the last of several boxes does not win a hedge"),
    row("5", "<answer>4</answer> <answer>5</answer>", 0.0, "answer tags that disagree are no answer"),
    row("4", "<answer>4</answer> so again <answer>4</answer>", 2.0, "answer tags that agree are one answer"),
    row("4", "<answer><answer>4</answer></answer>", 0.0, "nested answer tags are malformed"),
    row("7", "<reasoning>So the answer is 7.</reasoning>", 0.0, "an answer only in the reasoning is not committed"),
    row("7", r"<think>\boxed{7}</think> I am not sure.", 0.0, "a box inside <think> is not the answer (TRL reasoning_accuracy_reward)"),
    row("7", "<think>3 + 4</think>\n<answer>7</answer>", 2.0, "the answer after the reasoning pays"),
    row("7", "3 + 4 = 7</think> The answer is 7.", 2.0, "a prompt-opened <think>: the answer after </think> pays"),
    row("1000", "<answer>1,000</answer>", 2.0, "a thousands separator keeps the value"),
    row("12", "<answer>1,2</answer>", 0.0, "a comma between single digits is a list, not 12"),
    row("1000", "<answer>1.000</answer>", 0.0, "a European thousands point reads as 1.0"),
    row("2", "<answer>2 million</answer>", 0.0, "a scale word changes the value"),
    row("309", "<answer>1e309</answer>", 0.0, "an overflowing number is not its exponent"),
    row("7", "<answer>nan</answer>", 0.0, "nan is not a number"),
    row("7", "<answer>inf</answer>", 0.0, "inf is not a number"),
    row("9", RUNAWAY_NUMBER, 0.0, "a runaway number is not 9"),
    row("7", "<answer></answer>", 0.0, "an empty answer tag is no answer"),
    row("42", PROMPT_WITH_EXAMPLE, 0.0, "the prompt copied with its format example holds two answers"),
    row("Paris", "What is the capital of France, Paris or Rome?", 0.0, "the question copied back commits to nothing"),
    row("nan", "<answer>NaN</answer>", 2.0, "a text gold 'nan' is matched as text"),
]


@pytest.mark.parametrize("gold, completion, expected", EXACT)
def test_exact_match(gold, completion, expected):
    assert both_formats(exact_match_reward, completion, answer=gold) == expected


NUMERIC = [
    row("42", "<answer>42</answer>", 2.0, "the gold itself pays"),
    row("1000", "<answer>$1,000.</answer>", 2.0, "currency, thousands separators and a final period are formatting"),
    row("42", "<answer>x = 42</answer>", 2.0, "one number with words around it is that number"),
    row("42", "<answer>42 apples</answer>", 2.0, "a unit word keeps the number"),
    row("15", "<answer>15%</answer>", 2.0, "a percent sign keeps the number (GSM8K golds drop it)"),
    row("0.15", "<answer>15%</answer>", 0.0, "a percent is not converted to a fraction"),
    row("42", "<answer>24</answer>", 0.0, "permuted digits are another number"),
    row("-3", "<answer>3</answer>", 0.0, "the sign is part of the value"),
    row("100", EVERY_NUMBER, 0.0, "every number listed is no answer, not its last number"),
    row("5", "<answer>4 or 5</answer>", 0.0, "the last number of a hedge does not win"),
    row("5", r"\boxed{4}\boxed{5}", 0.0, "several boxes are a hedge"),
    row("5", "<answer>4</answer><answer>5</answer>", 0.0, "answer tags that disagree are no answer"),
    row("4", "<answer><answer>4</answer></answer>", 0.0, "nested answer tags are malformed"),
    row("4", r"<answer>\pm 4</answer>", 0.0, "plus or minus 4 is two answers"),
    row("0", "<answer>5 - 5</answer>", 0.0, "arithmetic is not evaluated: its numbers are not the answer"),
    row("10", "<answer>2^10</answer>", 0.0, "an exponent is not the answer"),
    row("1024", "<answer>2^10</answer>", 0.0, "a power is not evaluated (math_equivalence_reward does that)"),
    row("0.5", "<answer>1/2</answer>", 0.0, "a fraction is not evaluated (math_equivalence_reward does that)"),
    row("7", "<reasoning>So the answer is 7.</reasoning>", 0.0, "an answer only in the reasoning is not committed"),
    row("7", r"<think>\boxed{7}</think> I am not sure.", 0.0, "a box inside <think> is not the answer"),
    row("12", "<answer>1,2</answer>", 0.0, "a comma between single digits is a list, not 12"),
    row("15", "<answer>1,5</answer>", 0.0, "a decimal comma is not read as 15"),
    row("1000", "<answer>1.000</answer>", 0.0, "a European thousands point reads as 1.0"),
    row("1000", "<answer>1 000</answer>", 0.0, "digits split by a space are two numbers"),
    row("2", "<answer>2 million</answer>", 0.0, "a scale word changes the value"),
    row("2000000", "<answer>2 million</answer>", 0.0, "scale words are refused, not converted"),
    row("5", "<answer>5k</answer>", 0.0, "a k suffix changes the value"),
    row("309", "<answer>1e309</answer>", 0.0, "an overflowing number is neither inf nor its exponent"),
    row("1", "<answer>1e309</answer>", 0.0, "an overflowing number is not its mantissa"),
    row("7", "<answer>nan</answer>", 0.0, "nan is not a number"),
    row("7", "<answer>inf</answer>", 0.0, "inf is not a number"),
    row("9", RUNAWAY_NUMBER, 0.0, "a number too long to be an answer"),
    row("7", "<answer></answer>", 0.0, "an empty answer tag is no answer"),
    row("42", PROMPT_WITH_EXAMPLE, 0.0, "the prompt copied with its format example holds two answers"),
    row("forty two", "<answer>42</answer>", None, "a gold that is not a number: the reward does not apply"),
    row("12 apples", "<answer>12</answer>", None, "a gold with words is not one number"),
    row("nan", "<answer>nan</answer>", None, "a NaN gold is not a number"),
    row("1e309", "<answer>1e309</answer>", None, "an overflowing gold is not a number"),
]


@pytest.mark.parametrize("gold, completion, expected", NUMERIC)
def test_numeric_correctness(gold, completion, expected):
    assert both_formats(numeric_correctness_reward, completion, answer=gold) == expected


MATH = [
    row("forty two", "<answer>two forty</answer>", None, "a prose gold is not math: its letters would be a commutative product"),
    row("Paris", "<answer>risaP</answer>", None, "a word gold is not math: any permutation would equal it"),
    row("Paris", "<answer>Paris</answer>", None, "not math even when equal (exact_match_reward pays it)"),
    row("2xy", "<answer>2yx</answer>", None, "letters written together read as a word"),
    row("2 x y", "<answer>2yx</answer>", 2.0, "real algebra: a product of variables commutes"),
    row(r"\text{Paris}", r"<answer>\text{risaP}</answer>", 0.0, r"a \text{} gold is compared as text"),
    row(r"\text{Paris}", r"<answer>\text{Paris}</answer>", 2.0, r"the \text{} gold itself pays"),
    row("nan", "<answer>nan</answer>", None, "nan is a word, not math"),
    row("0.5", r"<answer>\frac{1}{2}</answer>", 2.0, "equal values in another notation pay"),
    row("1024", "<answer>2^10</answer>", 2.0, "a power equal to the gold pays"),
    row("42", "<answer>24</answer>", 0.0, "permuted digits are another number"),
    row("100", EVERY_NUMBER, 0.0, "every number listed is no answer"),
    row("4", "<answer>4 or 5</answer>", 0.0, "a hedge reads as the set {4, 5}"),
    row("4", "<answer>4, 5</answer>", 0.0, "a list reads as the set {4, 5}"),
    row("4", r"<answer>\pm 4</answer>", 0.0, "plus or minus 4 is two answers"),
    row("5", r"\boxed{4}\boxed{5}", 0.0, "the last of several boxes does not win a hedge"),
    row("5", "<answer>4</answer><answer>5</answer>", 0.0, "answer tags that disagree are no answer"),
    row("4", "<answer><answer>4</answer></answer>", 0.0, "nested answer tags are malformed"),
    row("7", r"<think>\boxed{7}</think> I am not sure.", 0.0, "a box inside <think> is not the answer"),
    row("7", "<think>The final answer is $7$.</think>", 0.0, "math inside <think> is not the answer"),
    row("1000", "<answer>1{,}000</answer>", 2.0, "a LaTeX thousands separator keeps the value"),
    row("12", "<answer>1,2</answer>", 0.0, "a comma between single digits reads as the set {1, 2}"),
    row("1000", "<answer>1.000</answer>", 0.0, "a European thousands point reads as 1.0"),
    row("2", r"<answer>2\text{ million}</answer>", 0.0, "a scale word changes the value"),
    row("5000", "<answer>5 km</answer>", 0.0, "units are not converted"),
    row("309", "<answer>1e309</answer>", 0.0, "an overflowing number is not its exponent"),
    row("7", "<answer>nan</answer>", 0.0, "nan is not a number"),
    row("7", r"<answer>\infty</answer>", 0.0, "infinity is not 7"),
    row("1", RUNAWAY_NUMBER, 0.0, "a runaway number is not 1"),
    row("7", "<answer></answer>", 0.0, "an empty answer tag is no answer"),
    row("42", PROMPT_WITH_EXAMPLE, 0.0, "the prompt copied with its format example holds two answers"),
]


@pytest.mark.parametrize("gold, completion, expected", MATH)
def test_math_equivalence(gold, completion, expected):
    assert both_formats(math_equivalence_reward, completion, answer=gold) == expected


OPTIONS_PROMPT = "Which is prime? (A) 7 (B) 8 (C) 9. Answer with one letter."
CHOICE = [
    row("B", "<answer>B</answer>", 2.0, "the gold letter pays"),
    row("(B) 4", "<answer>(b) 4</answer>", 2.0, "the option with its text pays, in any case"),
    row("B", r"So \boxed{B}", 2.0, "a boxed letter pays"),
    row("D", "So the answer is D.", 2.0, "an untagged 'the answer is D' pays"),
    row("B", "Option A is wrong, so the answer is B.", 2.0, "the last option named is the answer"),
    row("B", "<answer>(B) A triangle</answer>", 2.0, "an article in the option text is not a second option"),
    row("A", "<answer>A B C D</answer>", 0.0, "every option listed is no answer"),
    row("A", "<answer>A, B, C or D</answer>", 0.0, "a list of options is a hedge"),
    row("A", "<answer>A/B</answer>", 0.0, "two options joined by a slash are a hedge"),
    row("A", "<answer>(A) 7 (B) 8 (C) 9</answer>", 0.0, "the options copied from the prompt are no answer"),
    row("A", OPTIONS_PROMPT, 0.0, "the question copied back commits to nothing"),
    row("A", "The answer is A or B.", 0.0, "an untagged hedge is no answer"),
    row("A", "The answer is A, B or C.", 0.0, "an untagged list is no answer"),
    row("A", "<answer>A</answer><answer>B</answer>", 0.0, "answer tags that disagree are no answer"),
    row("B", r"\boxed{A}\boxed{B}", 0.0, "the last of several boxes does not win a hedge"),
    row("A", "<answer><answer>A</answer></answer>", 0.0, "nested answer tags are malformed"),
    row("C", "<reasoning>The answer is C.</reasoning>", 0.0, "an answer only in the reasoning is not committed"),
    row("C", "<think>The answer is C.</think> The answer is D.", 0.0, "the answer after the reasoning decides"),
    row("A", "The answer is a triangle.", 0.0, "the article 'a' is not option A"),
    row("A", "<answer>nan</answer>", 0.0, "a NaN-like answer picks no option"),
    row("A", "<answer></answer>", 0.0, "an empty answer tag is no answer"),
    row("7", "<answer>A</answer>", None, "a number gold is not an option: the reward does not apply"),
    row("Paris", "<answer>A</answer>", None, "a word gold is not an option"),
    row("A cat", "<answer>A</answer>", None, "a sentence starting with 'A' is not option A"),
]


@pytest.mark.parametrize("gold, completion, expected", CHOICE)
def test_multiple_choice(gold, completion, expected):
    assert both_formats(multiple_choice_reward, completion, answer=gold) == expected


INT_ANSWER = [
    row(None, "<answer>42</answer>", 0.5, "a whole number pays the format"),
    row(None, "<answer>1,234</answer>", 0.5, "thousands separators are a whole number"),
    row(None, "<answer>-7</answer>", 0.5, "a negative whole number pays"),
    row(None, "<answer>4</answer> so <answer>4</answer>", 0.5, "answer tags that agree are one answer"),
    row(None, "<answer>3.5</answer>", 0.0, "a decimal is not whole"),
    row(None, "<answer>1,2</answer>", 0.0, "a comma between single digits is a list"),
    row(None, EVERY_NUMBER, 0.0, "every number listed is not a number"),
    row(None, "<answer>4 or 5</answer>", 0.0, "a hedge is not a number"),
    row(None, "<answer>4</answer><answer>5</answer>", 0.0, "answer tags that disagree are no answer"),
    row(None, "<answer><answer>4</answer></answer>", 0.0, "nested answer tags are malformed"),
    row(None, "<reasoning><answer>4</answer></reasoning>", 0.0, "an answer tag inside the reasoning is not the answer"),
    row(None, "<answer>2 million</answer>", 0.0, "a number with a scale word is not a bare whole number"),
    row(None, "<answer>1e309</answer>", 0.0, "scientific overflow is not a whole number"),
    row(None, "<answer>nan</answer>", 0.0, "nan is not a number"),
    row(None, "<answer>" + "9" * 100 + "</answer>", 0.0, "a number too long to be an answer"),
    row(None, "<answer></answer>", 0.0, "an empty answer tag is no answer"),
    row(None, r"\boxed{4}", 0.0, "only the answer tag is read"),
]


@pytest.mark.parametrize("gold, completion, expected", INT_ANSWER)
def test_int_answer(gold, completion, expected):
    assert both_formats(int_answer_reward, completion) == expected


def python(source):
    return "```python\n" + source.strip("\n") + "\n```"


SQUARE = "def solution(x):\n    return x * x\n"
ASSERTS = [{"assert": a} for a in (
    "solution(3) == 9",
    "solution(-2) == 4",
    "solution(5) > 20",
    "abs(solution(0.5) - 0.25) < 1e-9",
    "math.isclose(solution(2), 4.0)",
    "all(solution(x) == x * x for x in range(4))",
)]
STDIN = [{"input": "2 3\n", "output": "5"}, {"input": "1 1\n", "output": "2"}]
REWRITES_STDOUT = """
import sys
class Rewriter:
    def __init__(self, stream):
        self.stream = stream
    def write(self, text):
        return self.stream.write(text.replace(" fail", " pass").replace("False", "True"))
    def flush(self):
        self.stream.flush()
sys.stdout = Rewriter(sys.stdout)
def solution(x):
    return 0
"""
EQUALS_ANYTHING = """
class Anything:
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = lambda self, other: True
    __sub__ = __rsub__ = lambda self, other: 0
    __abs__ = lambda self: 0
    __float__ = lambda self: 4.0
def solution(x):
    return Anything()
"""
PATCHES_BUILTINS = """
import builtins, json, math
builtins.abs = lambda x: 0
builtins.all = builtins.bool = lambda value: True
builtins.eval = lambda *args: True
builtins.repr = json.dumps = lambda *args, **kwargs: "9"
math.isclose = lambda *args, **kwargs: True
def solution(x):
    return 0
"""
FORGES_REPORTS = """
import re
for token in set(re.findall(r"[0-9a-f]{32}", open(__file__).read())):
    for i in range(6):
        print(token, i, "pass")
for i in range(6):
    print(i, "pass")
raise SystemExit(0)
"""
WRITES_GRADER_FILE = """
try:
    open(GRADER_FILE, "w").write("[]")
except OSError:
    pass
def solution(x):
    return 0
"""

CODE = [
    row(ASSERTS, python(SQUARE), 2.0, "a correct program passes every check"),
    row(ASSERTS, "<think>first try\n" + python("def solution(x):\n    return 0") + "\n</think>\n" + python(SQUARE), 2.0,
        "the program after the reasoning is graded"),
    row(ASSERTS, python("print(9)\nprint('solution(3) == 9')"), 0.0, "printing the expected value passes nothing"),
    row(ASSERTS, python("def solution(x):\n    return 9"), 0.333333, "a hard-coded example passes only its own check"),
    row(ASSERTS, python("import sys\nsys.exit(0)\n" + SQUARE), 0.0, "exiting with status 0 before the checks passes nothing"),
    row(ASSERTS, python("import os\nos._exit(0)\n" + SQUARE), 0.0, "a hard exit before the checks passes nothing"),
    row(ASSERTS, python("def solution(x):\n    raise SystemExit(0)"), 0.0, "exiting inside the function fails each check"),
    row(ASSERTS, python(EQUALS_ANYTHING), 0.0, "an object that equals and exceeds anything is not plain data"),
    row(ASSERTS, python("class Int(int):\n    __eq__ = __gt__ = __lt__ = lambda s, o: True\n    __hash__ = int.__hash__\n"
                        "def solution(x):\n    return Int(0)"), 0.0, "an int subclass that equals anything is not an int"),
    row(ASSERTS, python(REWRITES_STDOUT), 0.0, "rewriting sys.stdout cannot turn a fail into a pass"),
    row(ASSERTS, python(PATCHES_BUILTINS), 0.0, "patched builtins, json and math are not the grader's"),
    row(ASSERTS, python(FORGES_REPORTS), 0.0, "the report token is not in the source, and reports without it do not count"),
    row(ASSERTS, "<think>\n" + python(SQUARE) + "\n</think>\nDone.", 0.0, "code only in the reasoning is not the answer"),
    row(ASSERTS, "```python\n```", 0.0, "an empty code block passes nothing"),
    row(STDIN, python("a, b = map(int, input().split())\nprint(a + b)"), 2.0, "a correct stdin program passes both cases"),
    row(STDIN, python("print(5)"), 1.0, "printing one expected output passes that case only"),
]


@pytest.mark.parametrize("tests, completion, expected", CODE)
def test_code_execution(tests, completion, expected):
    assert both_formats(CodeExecutionReward(partial_credit=True), completion, test_cases=tests) == expected


def test_code_cannot_write_the_graders_files(tmp_path):
    grader_file = tmp_path / "test_cases.json"
    grader_file.write_text('[{"assert": "solution(3) == 9"}]')
    before = hashlib.sha256(grader_file.read_bytes()).hexdigest()
    program = python(WRITES_GRADER_FILE.replace("GRADER_FILE", repr(str(grader_file))))
    assert both_formats(CodeExecutionReward(partial_credit=True), program, test_cases=ASSERTS) == 0.0
    assert hashlib.sha256(grader_file.read_bytes()).hexdigest() == before
