"""snapcell.google_adk against the real Google ADK (google-adk, pinned in requirements-dev.txt):
an LlmAgent whose model is a scripted BaseLlm answers with code blocks; ADK's own code
execution flow runs them through SnapcellCodeExecutor, and the next request's contents hold
what the model was told. Input files and execution ids go straight to execute_code too."""

import asyncio
import sys

import pytest

if sys.version_info < (3, 11):
    pytest.skip("google-adk needs Python 3.11 or newer", allow_module_level=True)

from google.adk.agents import LlmAgent
from google.adk.code_executors.code_execution_utils import CodeExecutionInput, File
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

import snapcell
from snapcell.google_adk import SnapcellCodeExecutor


class Scripted(BaseLlm):
    """Answers with each reply in turn (code in a ```python block, or plain text); keeps the
    text of what each request's last content said."""

    replies: list = []
    told: list = []

    async def generate_content_async(self, llm_request, stream=False):
        last = llm_request.contents[-1]
        self.told.append("".join(
            (p.text or "") + (p.code_execution_result.output if p.code_execution_result else "")
            for p in last.parts or []))
        reply = self.replies[len(self.told) - 1] if len(self.told) <= len(self.replies) else "done"
        text = reply if reply == "done" else f"```python\n{reply}\n```"
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def converse(executor, *turns):
    """Runs the agent for each user turn (a list of replies), in one ADK session; returns the
    model (its .told) and the runner's artifact service."""
    model = Scripted(model="scripted", replies=[], told=[])
    agent = LlmAgent(name="analyst", model=model, code_executor=executor)
    runner = InMemoryRunner(agent=agent, app_name="test")

    async def go():
        session = await runner.session_service.create_session(app_name="test", user_id="u")
        for replies in turns:
            model.replies.extend(replies + ["done"])
            message = types.Content(role="user", parts=[types.Part(text="go")])
            async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
                pass
        return session.id

    session_id = asyncio.run(go())
    return model, runner, session_id


def test_a_block_runs_and_the_model_reads_its_output_and_value():
    with snapcell.Sandbox() as sb:
        model, _, _ = converse(SnapcellCodeExecutor(sandbox=sb), ["print('hi')\n6 * 7"])
    assert "hi\nvalue: 42\n" in model.told[1]


def test_a_failure_is_stderr_with_its_output_and_cause():
    with snapcell.Sandbox() as sb:
        executor = SnapcellCodeExecutor(sandbox=sb)
        model, _, _ = converse(executor, ["print('before')\n1/0", "print('fixed')"])
        r = executor.execute_code(None, CodeExecutionInput(code="print('before')\n1/0"))
    assert r.stderr.startswith("before\n") and "ZeroDivisionError: division by zero" in r.stderr
    assert r.exit_code == 1
    assert r.stderr in model.told[1]
    assert "fixed" in model.told[2]


def test_stateful_keeps_a_session_per_execution_id_across_turns():
    with snapcell.Sandbox() as sb:
        executor = SnapcellCodeExecutor(sandbox=sb, stateful=True)
        model, _, session_id = converse(executor, ["secret = 6"], ["secret * 7"])
        assert "value: 42" in model.told[-1]
        # another id is another session; no id is a fresh cell
        other = executor.execute_code(None, CodeExecutionInput(code="secret", execution_id="other"))
        assert "NameError" in other.stderr
        none = executor.execute_code(None, CodeExecutionInput(code="secret"))
        assert "NameError" in none.stderr
        same = executor.execute_code(None, CodeExecutionInput(code="secret", execution_id=session_id))
        assert same.stdout == "value: 6\n"
        executor.close()


def test_stateless_forgets_between_blocks():
    with snapcell.Sandbox() as sb:
        executor = SnapcellCodeExecutor(sandbox=sb)
        executor.execute_code(None, CodeExecutionInput(code="x = 1", execution_id="a"))
        assert "NameError" in executor.execute_code(None, CodeExecutionInput(code="x", execution_id="a")).stderr


def test_input_files_are_in_the_working_directory_for_each_call():
    with snapcell.Sandbox() as sb:
        executor = SnapcellCodeExecutor(sandbox=sb)
        files = [File(name="data.csv", content=b"a,b\n1,2\n", mime_type="text/csv"),
                 File(name="blob.bin", content="AAEC", mime_type="application/octet-stream")]  # base64
        r = executor.execute_code(None, CodeExecutionInput(
            code="print(open('data.csv').read().splitlines())\nlist(open('blob.bin', 'rb').read())",
            input_files=files))
        assert r.stdout == "['a,b', '1,2']\nvalue: [0, 1, 2]\n"
        # the next call has its own files only
        r = executor.execute_code(None, CodeExecutionInput(code="import os\nsorted(os.listdir('.'))"))
        assert r.stdout == "value: []\n"
        # the model's line numbers are its own
        r = executor.execute_code(None, CodeExecutionInput(code="x = 1\n1/0", input_files=files))
        assert "line 2" in r.stderr
        # a fresh cell gets them as the run's own files (also at /input), not inside its code:
        # 13 MiB would be more than the 16 MiB code cap as base64
        big = File(name="big.bin", content=bytes(13 << 20), mime_type="application/octet-stream")
        r = executor.execute_code(None, CodeExecutionInput(
            code="import os\n[os.path.getsize('big.bin'), sorted(os.listdir('/input'))]",
            input_files=[big, files[0]]))
        assert r.stdout == 'value: [13631488, ["big.bin", "data.csv"]]\n', r


def test_a_sessions_block_gets_its_input_files_in_the_working_directory():
    with snapcell.Sandbox() as sb:
        executor = SnapcellCodeExecutor(sandbox=sb, stateful=True)
        files = [File(name="data.csv", content=b"a,b\n", mime_type="text/csv")]
        r = executor.execute_code(None, CodeExecutionInput(
            code="kept = open('data.csv').read()\nkept", input_files=files, execution_id="c"))
        assert r.stdout == 'value: "a,b\\n"\n', r
        r = executor.execute_code(None, CodeExecutionInput(code="kept", execution_id="c"))
        assert r.stdout == 'value: "a,b\\n"\n', r
        executor.close()


def test_files_left_in_output_become_artifacts():
    with snapcell.Sandbox() as sb:
        code = "open('/output/report.txt', 'w').write('total: 3')"
        model, runner, session_id = converse(SnapcellCodeExecutor(sandbox=sb), [code])

    async def read():
        return await runner.artifact_service.load_artifact(app_name="test", user_id="u",
                                                           session_id=session_id, filename="report.txt")

    assert asyncio.run(read()).inline_data.data == b"total: 3"
    assert "report.txt" in model.told[1]


def test_a_sandbox_is_required():
    with pytest.raises(Exception, match="sandbox"):
        SnapcellCodeExecutor(sandbox="no")
