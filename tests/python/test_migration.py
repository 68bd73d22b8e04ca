"""A program written for agent_framework_hyperlight, the way its documentation shows, runs on
snapcell after changing the import line and the two class names, and nothing else."""

import subprocess
import sys
import textwrap

REFERENCE_PROGRAM = textwrap.dedent('''
    import asyncio, json, os, tempfile
    from agent_framework import Agent, BaseChatClient, ChatResponse, Content, FunctionInvocationLayer, Message, tool
    from agent_framework_hyperlight import HyperlightCodeActProvider, HyperlightExecuteCodeTool, FileMount, AllowedDomain

    @tool(approval_mode="never_require")
    def compute(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    class Model(FunctionInvocationLayer, BaseChatClient):
        async def _inner_get_response(self, *, messages, stream, options, **kwargs):
            done = [c for m in messages for c in m.contents if c.type == "function_result"]
            if done:
                return ChatResponse(messages=[Message(role="assistant", contents=[Content.from_text(str(done[-1].result))])])
            code = 'print(call_tool("compute", a=20, b=22), open("/input/notes.txt").read())'
            call = Content.from_function_call(call_id="1", name="execute_code", arguments=json.dumps({"code": code}))
            return ChatResponse(messages=[Message(role="assistant", contents=[call])])

    async def main():
        workspace = tempfile.mkdtemp()
        with open(os.path.join(workspace, "notes.txt"), "w") as f:
            f.write("from the workspace")
        codeact = HyperlightCodeActProvider(
            tools=[compute],
            approval_mode="never_require",
            workspace_root=workspace,
            file_mounts=[FileMount(workspace, "copy")],
            allowed_domains=[AllowedDomain("api.example.com", ("GET",)), "bing.com"],
        )
        agent = Agent(Model(), instructions="You are a helpful assistant.", context_providers=[codeact])
        result = await agent.run("What is 20 + 22?")
        print(result.text)
        direct = HyperlightExecuteCodeTool(tools=[compute])
        contents = await direct.invoke(arguments={"code": "print(call_tool('compute', a=1, b=2))"})
        print(contents[0].text, end="")
        print(direct.approval_mode, [t.name for t in codeact.get_tools()], codeact.get_allowed_domains()[0].target)

    asyncio.run(main())
''')


def test_a_reference_program_runs_after_the_documented_renames(tmp_path):
    program = (
        REFERENCE_PROGRAM.replace("from agent_framework_hyperlight import", "from snapcell.agent_framework import")
        .replace("HyperlightCodeActProvider", "CodeActProvider")
        .replace("HyperlightExecuteCodeTool", "ExecuteCodeTool")
    )
    changed = [a for a, b in zip(REFERENCE_PROGRAM.splitlines(), program.splitlines()) if a != b]
    assert len(changed) == 3  # the import line and the two lines naming the classes
    script = tmp_path / "agent.py"
    script.write_text(program)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["42 from the workspace", "", "3", "never_require ['compute'] api.example.com"]


def test_interpreter_exit_ends_every_sandbox(tmp_path, work_tmp):
    script = tmp_path / "leave.py"
    script.write_text(
        "import os, snapcell\n"
        "sb = snapcell.Sandbox()\n"
        "print(sb.stats()['template_pid'])\n"
        "sb.run('print(1)')\n"  # exits without close()
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout)
    import os

    assert not os.path.exists(f"/proc/{pid}")
    assert list(work_tmp.iterdir()) == []
