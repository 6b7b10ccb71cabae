/**
 * The agent loop through the `rx` command, against a scripted Chat Completions server: several
 * calls in one answer, suspension (model down, SIGTERM), approvals (from another process, at a
 * terminal), instructions, and limits changed on resume.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { bin, bwrapWorks, jsonLines, rx, sandbox, start, until } from "./helpers.js"

type Json = Record<string, unknown>

const calls = (...list: ReadonlyArray<readonly [string, unknown]>) =>
  FakeServer.completion({ toolCalls: list.map(([name, args]) => ({ name, arguments: typeof args === "string" ? args : JSON.stringify(args) })) })
const call = (name: string, args: unknown) => calls([name, args])
const done = (summary: string) => call("done", { summary })

/** The flags every run here uses: its database, workspace, the server, no sandbox unless given. */
const at = (box: ReturnType<typeof sandbox>, server: FakeServer.FakeServer, mode: "none" | "bwrap" = "none") =>
  ["--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", mode]

if (!bwrapWorks) console.warn("SKIPPING the sandboxed SIGTERM case: /usr/bin/bwrap is missing or cannot create namespaces")

const events = (goalId: string, db: string) =>
  Effect.map(rx(["events", goalId, "--db", db]), (ran) => jsonLines(ran.stdout))

const goalOf = (stdout: string) => /^goal (\S+):/m.exec(stdout)?.[1] ?? String(jsonLines(stdout)[0]?.["goalId"])

/** What the model was sent in request `index`, as text. */
const sent = (server: FakeServer.FakeServer, index: number) => JSON.stringify(server.received[index]?.body ?? null)

/**
 * `rx` with a pseudo-terminal on stdin and stdout (util-linux script), as a person at a terminal
 * has: what it printed so far, and how many times it asked about a call of `tool`.
 */
const atTerminal = (args: ReadonlyArray<string>, tool = "shell") => {
  const command = [process.execPath, bin, ...args].map((arg) => `'${arg}'`).join(" ")
  const child = spawn("script", ["-qfec", command, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] })
  let out = ""
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (out += chunk.toString()))
  const closed = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  const output = () => out
  const prompts = () => out.split(`run it? y = yes, n = no, a = always allow ${tool} in this goal: `).length - 1
  return { child, closed, output, prompts }
}

/** The seqs are 0..n-1 and the log has at most one Terminated, last. */
const wellFormed = (log: ReadonlyArray<Json>) => {
  expect(log.map((e) => e["seq"])).toEqual(log.map((_, i) => i))
  const ends = log.filter((e) => e["_tag"] === "Terminated")
  expect(ends.length).toBeLessThanOrEqual(1)
  if (ends.length === 1) expect(log.at(-1)?.["_tag"]).toBe("Terminated")
}

/** Processes whose command line holds `marker`. */
const withMarker = (marker: string): ReadonlyArray<string> =>
  readdirSync("/proc").filter((pid) => {
    if (!/^\d+$/.test(pid)) return false
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker)
    } catch {
      return false
    }
  })

describe("several calls in one answer", () => {
  it.scopedLive("three calls, one invalid: each recorded with its outcome, the valid two ran, replay identical", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([
        calls(["read_file", { path: "hello.txt" }], ["read_file", { file: "hello.txt" }], ["list_dir", {}]),
        done("read and listed")
      ])
      const box = sandbox()
      const ran = yield* rx(["run", "read and list", ...at(box, server)])
      expect(ran.stderr).toBe("")
      expect(ran.code).toBe(0)
      expect(ran.stdout).toMatch(/\n\s+1\s+read_file\s+\{"path":"hello.txt"\}\s+ok/)
      expect(ran.stdout).toMatch(/\n\s+1\s+\(rejected\)\s+index 1, read_file: invalid_input: /)
      expect(ran.stdout).toMatch(/\n\s+1\s+list_dir\s+\{\}\s+ok/)
      const goalId = goalOf(ran.stdout)
      const log = yield* events(goalId, box.db)
      wellFormed(log)
      expect(log.map((e) => e["_tag"]).slice(0, 8)).toEqual([
        "GoalSubmitted", "ModelResponded", "ToolStarted", "ToolSucceeded", "ActionRejected", "ToolStarted", "ToolSucceeded", "IterationCompleted"
      ])
      expect(log[4]).toMatchObject({ kind: "invalid_input", index: 1, tool: "read_file" })
      expect(log.filter((e) => e["_tag"] === "ToolStarted").map((e) => [e["callId"], e["tool"], e["index"]])).toEqual([
        [`${goalId}:1`, "read_file", 0],
        [`${goalId}:1:2`, "list_dir", 2]
      ])
      // The model saw all three results, the rejection as the second call's.
      const second = sent(server, 1)
      expect(second).toContain("hello from the workspace")
      expect(second).toContain("invalid input for read_file")
      expect(server.received.map((r) => r.invalid)).toEqual([undefined, undefined])
      const inspected = yield* rx(["inspect", goalId, "--db", box.db])
      expect(inspected.stdout).toContain("model [0] read_file")
      expect(inspected.stdout).toMatch(/rejected {2}index 1, read_file: invalid_input/)
      expect(inspected.stdout).toMatch(/tool {6}\[2\] list_dir/)
      const replayed = yield* rx(["replay", goalId, "--db", box.db])
      expect(replayed.code).toBe(0)
      expect(replayed.stdout).toContain("identical")
    }))
})

describe("suspension", () => {
  it.scopedLive("a model server down, then back: exit 11 with Suspended(model_unavailable), rx list says why, rx resume finishes, replay identical", () =>
    Effect.gen(function*() {
      const port = yield* FakeServer.freePort
      const box = sandbox()
      const first = yield* rx(["run", "read hello.txt", "--db", box.db, "--workspace", box.workspace, "--base-url", `http://127.0.0.1:${port}/v1`, "--model", "fake", "--sandbox", "none", "--retries", "0"])
      expect(first.code).toBe(11)
      expect(first.stdout).toMatch(/\(model\)\s+failed: .*cannot reach/)
      expect(first.stdout).toMatch(/\n {6}suspended \(model_unavailable\)\n/)
      expect(first.stdout).toMatch(/suspended \(model_unavailable\), open, after 0 iterations \(goal \S+, exit 11\)/)
      const goalId = goalOf(first.stdout)
      expect(first.stdout).toContain(`rx resume ${goalId} --db ${box.db} continues it once the model server answers`)
      expect((yield* events(goalId, box.db)).map((e) => e["_tag"])).toEqual(["GoalSubmitted", "ModelFailed", "Suspended"])
      const listed = yield* rx(["list", "--db", box.db])
      expect(listed.stdout).toMatch(new RegExp(`${goalId}\\s+waiting\\(outage\\)\\s+0 it`))
      expect(jsonLines((yield* rx(["list", "--json", "--db", box.db])).stdout)[0]).toMatchObject({
        goalId,
        status: "open",
        suspended: { reason: "model_unavailable" }
      })
      // The server is back (at another address: the resume records it).
      const server = yield* FakeServer.make([call("read_file", { path: "hello.txt" }), done("back and done")])
      const resumed = yield* rx(["resume", goalId, "--db", box.db, "--base-url", server.baseUrl])
      expect(resumed.stderr).toBe("")
      expect(resumed.code).toBe(0)
      expect(resumed.stdout).toContain("back and done")
      const log = yield* events(goalId, box.db)
      wellFormed(log)
      expect(log.map((e) => e["_tag"]).slice(0, 4)).toEqual(["GoalSubmitted", "ModelFailed", "Suspended", "OptionsChanged"])
      expect(log.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect((yield* rx(["list", "--db", box.db])).stdout).toMatch(new RegExp(`${goalId}\\s+terminated\\(done\\)\\s+2 it`))
      expect((yield* rx(["inspect", goalId, "--db", box.db])).stdout).toMatch(/suspensions\n {2}seq 2 \(.*\): model_unavailable: /)
      const replayed = yield* rx(["replay", goalId, "--db", box.db])
      expect(replayed.code).toBe(0)
      expect(replayed.stdout).toContain("identical")
    }))

  // SIGHUP: the terminal (or the SSH session) that ran rx closed; without a sandbox nothing else stops the command.
  for (const [mode, signal] of [["none", "SIGTERM"], ["bwrap", "SIGTERM"], ["none", "SIGHUP"]] as const) {
    it.scopedLive.skipIf(mode === "bwrap" && !bwrapWorks)(`${signal} during a shell call (--sandbox ${mode}): the call recorded unknown, Suspended(shutdown), exit 11, no process left; rx resume finishes`, () =>
      Effect.gen(function*() {
        const marker = `0.0${Math.floor(Math.random() * 1e9)}`
        const server = yield* FakeServer.make([call("shell", { command: `sleep 300 ${marker}` }), done("after the shutdown")])
        const box = sandbox()
        const running = start(["run", "sleep", "--json", ...at(box, server, mode)])
        yield* until(() => withMarker(marker).length > 0, "the shell command to start")
        running.kill(signal)
        const ran = yield* Effect.promise(() => running.done)
        expect(ran.signal).toBe(null)
        expect(ran.code).toBe(11)
        expect(ran.stderr).toContain(`stopping (${signal})`)
        const lines = jsonLines(ran.stdout)
        expect(lines.map((e) => e["_tag"])).toEqual(["GoalSubmitted", "ModelResponded", "ToolStarted", "ToolFailed", "IterationCompleted", "Suspended"])
        expect(lines[3]).toMatchObject({ tool: "shell", error: { kind: "unknown" } })
        expect(lines[5]).toMatchObject({ reason: "shutdown" })
        // The command and its shell were killed with rx's runner: nothing is left running.
        yield* until(() => withMarker(marker).length === 0, "the command's processes to be gone").pipe(Effect.exit)
        expect(withMarker(marker)).toEqual([])
        const goalId = String(lines[0]?.["goalId"])
        const listed = yield* rx(["list", "--db", box.db])
        expect(listed.stdout).toMatch(new RegExp(`${goalId}\\s+idle\\(shutdown\\)`))
        const resumed = yield* rx(["resume", goalId, "--db", box.db])
        expect(resumed.code).toBe(0)
        expect(resumed.stdout).toContain("after the shutdown")
        // The model was told the call's effect is unknown; nothing ran it again.
        expect(sent(server, 1)).toContain("whether it took effect is unknown")
        const log = yield* events(goalId, box.db)
        wellFormed(log)
        expect(log.filter((e) => e["_tag"] === "ToolStarted")).toHaveLength(1)
        expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)
      }), 60_000)
  }
})

/** Run `rx run --ask shell` (no terminal) until it suspends; returns the goal and its server. */
const askShell = (steps: ReadonlyArray<FakeServer.Step>) =>
  Effect.gen(function*() {
    const server = yield* FakeServer.make(steps)
    const box = sandbox()
    const ran = yield* rx(["run", "make a file", "--ask", "shell", ...at(box, server)])
    expect(ran.code).toBe(11)
    const goalId = goalOf(ran.stdout)
    return { box, goalId, ran, server }
  })

describe("approvals", () => {
  it.scopedLive("--ask shell, approved from another process: rx resume runs the stored call with no new model request", () =>
    Effect.gen(function*() {
      const { box, goalId, ran, server } = yield* askShell([call("shell", { command: "echo approved > made.txt" }), done("made it")])
      expect(ran.stdout).toContain("  approval shell=ask")
      expect(ran.stdout).toMatch(/\n\s+1\s+shell\s+\{"command":"echo approved > made.txt"\}\s+waits for approval/)
      expect(ran.stdout).toContain("suspended (awaiting_approval), open")
      expect(ran.stdout).toContain(`call ${goalId}:1 waits for approval: shell, with this input:\n  command: "echo approved > made.txt"\n`)
      expect(ran.stdout).toContain(`approve: rx approve ${goalId} --db ${box.db}`)
      expect(ran.stdout).toContain(`then:    rx resume ${goalId} --db ${box.db}`)
      expect((yield* rx(["list", "--db", box.db])).stdout).toMatch(new RegExp(`${goalId}\\s+waiting\\(approval\\)`))
      expect(existsSync(join(box.workspace, "made.txt"))).toBe(false)
      // A wrong call id, then the right decision; it runs nothing.
      const wrong = yield* rx(["approve", goalId, "--call", `${goalId}:7`, "--db", box.db])
      expect(wrong.code).toBe(1)
      expect(wrong.stderr).toBe(`rx: goal ${goalId} waits for call ${goalId}:1, not ${goalId}:7 (rx inspect ${goalId} shows its approvals)\n`)
      const approved = yield* rx(["approve", goalId, "--call", `${goalId}:1`, "--by", "alice", "--db", box.db])
      expect(approved.stderr).toBe("")
      expect(approved.code).toBe(0)
      expect(approved.stdout).toContain(`approved call ${goalId}:1 of goal ${goalId}, by alice:\n  shell, with this input:\n    command: "echo approved > made.txt"\n`)
      expect(approved.stdout).toContain(`rx resume ${goalId} --db ${box.db} runs it`)
      expect(existsSync(join(box.workspace, "made.txt"))).toBe(false)
      const again = yield* rx(["approve", goalId, "--db", box.db])
      expect(again.code).toBe(1)
      expect(again.stderr).toBe(`rx: goal ${goalId} has no call waiting for approval (rx inspect ${goalId} shows its approvals)\n`)
      expect(server.received).toHaveLength(1)
      const resumed = yield* rx(["resume", goalId, "--db", box.db])
      expect(resumed.code).toBe(0)
      expect(resumed.stdout).toContain("made it")
      expect(readFileSync(join(box.workspace, "made.txt"), "utf8")).toBe("approved\n")
      // One request for the call, one after it for the next step: none to run the approved call.
      expect(server.received).toHaveLength(2)
      const log = yield* events(goalId, box.db)
      wellFormed(log)
      const tags = log.map((e) => e["_tag"])
      expect(tags.slice(0, 7)).toEqual(["GoalSubmitted", "ModelResponded", "ApprovalRequested", "Suspended", "ApprovalDecided", "ToolStarted", "ToolSucceeded"])
      expect(log[5]?.["input"]).toEqual(log[2]?.["input"])
      expect(log[4]).toMatchObject({ approved: true, by: "alice", callId: `${goalId}:1` })
      const inspected = yield* rx(["inspect", goalId, "--db", box.db])
      expect(inspected.stdout).toMatch(/approval {2}shell \(call \S+:1\) waits for a person's approval/)
      expect(inspected.stdout).toMatch(/decided {3}approved by alice \(call \S+:1, \d{4}-/)
      expect(inspected.stdout).toMatch(/approvals\n {2}call \S+:1 \(seq 2, .*\): shell \{"command":"echo approved > made.txt"\}\n {4}approved by alice at \d{4}-.* \(seq 4\)/)
      expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)
      // Nothing to decide on a terminated goal, nor on one that does not exist.
      expect((yield* rx(["deny", goalId, "--db", box.db])).stderr).toBe(`rx: goal ${goalId} has terminated (done); there is nothing to decide\n`)
      const unknown = yield* rx(["approve", "g-nope", "--db", box.db])
      expect(unknown.code).toBe(1)
      expect(unknown.stderr).toBe(`rx: no goal with id g-nope in the database ${box.db} (rx list --db ${box.db} shows its goals; --db or RX_DB names another)\n`)
    }))

  it.scopedLive("--ask shell, denied with a reason: the call never runs and the model sees the reason", () =>
    Effect.gen(function*() {
      const { box, goalId, server } = yield* askShell([call("shell", { command: "echo denied > made.txt" }), done("gave up")])
      const denied = yield* rx(["deny", goalId, "--reason", "no shell on this machine", "--db", box.db])
      expect(denied.code).toBe(0)
      const user = String(jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout).at(-1)?.["by"])
      expect(user).not.toBe("")
      expect(denied.stdout).toContain(`denied call ${goalId}:1 of goal ${goalId}, by ${user}:\n  shell, with this input:\n    command: "echo denied > made.txt"\n`)
      const resumed = yield* rx(["resume", goalId, "--db", box.db])
      expect(resumed.code).toBe(0)
      expect(resumed.stdout).toMatch(new RegExp(`\\(rejected\\)\\s+index 0, shell: denied: denied by ${user}: no shell on this machine`))
      expect(existsSync(join(box.workspace, "made.txt"))).toBe(false)
      expect(server.received).toHaveLength(2)
      expect(sent(server, 1)).toContain("no shell on this machine")
      const log = yield* events(goalId, box.db)
      wellFormed(log)
      expect(log.find((e) => e["_tag"] === "ApprovalDecided")).toMatchObject({ approved: false, reason: "no shell on this machine" })
      expect(log.find((e) => e["_tag"] === "ActionRejected")).toMatchObject({ kind: "denied", index: 0, tool: "shell" })
      expect(log.filter((e) => e["_tag"] === "ToolStarted")).toEqual([])
      expect((yield* rx(["inspect", goalId, "--db", box.db])).stdout).toMatch(/decided {3}denied by \S+: no shell on this machine/)
      expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)
    }))

  it.scopedLive("--deny shell: the call is rejected without asking, and the model is told", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([call("shell", { command: "echo no > made.txt" }), done("fine")])
      const box = sandbox()
      const ran = yield* rx(["run", "try the shell", "--deny", "shell,http_fetch", ...at(box, server)])
      expect(ran.code).toBe(0)
      expect(ran.stdout).toMatch(/\(rejected\)\s+index 0, shell: denied: shell is not allowed in this run/)
      expect(existsSync(join(box.workspace, "made.txt"))).toBe(false)
      expect(sent(server, 1)).toContain("shell is not allowed in this run")
    }))

  it.scopedLive("at a terminal, rx asks in place: n (with a reason), y, and a (always) are recorded by terminal", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([
        call("shell", { command: "echo a > a.txt" }),
        call("shell", { command: "echo b > b.txt" }),
        call("shell", { command: "echo c > c.txt" }),
        call("shell", { command: "echo d > d.txt" }),
        done("four asked, three ran")
      ])
      const box = sandbox()
      const { child, closed, output, prompts } = atTerminal(["run", "make files", "--ask", "shell", ...at(box, server)])
      yield* until(() => prompts() === 1, "the first prompt")
      expect(output()).toContain("approval needed: call")
      expect(output()).toContain("command: \"echo a > a.txt\"")
      child.stdin.write("n\n")
      yield* until(() => output().includes("why? (the model is told"), "the reason prompt")
      child.stdin.write("not that one\n")
      yield* until(() => prompts() === 2, "the second prompt")
      child.stdin.write("maybe\n")
      yield* until(() => output().includes("please answer y, n or a"), "the answer to be refused")
      child.stdin.write("y\n")
      yield* until(() => prompts() === 4, "the third prompt")
      child.stdin.write("a\n")
      const code = yield* Effect.promise(() => closed)
      child.stdin.end()
      expect(code, output()).toBe(0)
      expect(prompts()).toBe(4)
      expect(output()).toContain("four asked, three ran")
      expect(output()).toMatch(/options changed \(seq \d+\): approval \{"shell":"auto"\} \(was \{"shell":"ask"\}\)/)
      expect(["a.txt", "b.txt", "c.txt", "d.txt"].map((f) => existsSync(join(box.workspace, f)))).toEqual([false, true, true, true])
      const goalId = goalOf(output())
      const log = yield* events(goalId, box.db)
      wellFormed(log)
      expect(log.filter((e) => e["_tag"] === "Suspended")).toEqual([])
      expect(log.filter((e) => e["_tag"] === "ApprovalRequested")).toHaveLength(3)
      expect(log.filter((e) => e["_tag"] === "ApprovalDecided").map((e) => [e["approved"], e["by"], e["reason"]])).toEqual([
        [false, "terminal", "not that one"],
        [true, "terminal", "approved at the terminal"],
        [true, "terminal", "approved at the terminal; shell always allowed from now on"]
      ])
      expect(log.find((e) => e["_tag"] === "OptionsChanged")).toMatchObject({ options: { approval: { shell: "auto" } } })
      expect(sent(server, 1)).toContain("not that one")
      expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)
    }), 60_000)

  it.scopedLive("at a terminal, a (always) for a sub-goal's call is that sub-goal's: recorded in its log, and its next call is not asked about", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([
        call("delegate", { goal: "make two files" }),
        call("shell", { command: "echo a > a.txt" }),
        call("shell", { command: "echo b > b.txt" }),
        done("two files"),
        done("delegated")
      ])
      const box = sandbox()
      const { child, closed, output, prompts } = atTerminal(["run", "delegate it", "--tools", "shell,delegate", "--ask", "shell", ...at(box, server)])
      yield* until(() => prompts() === 1, "the sub-goal's first prompt")
      child.stdin.write("a\n")
      const code = yield* Effect.promise(() => closed)
      child.stdin.end()
      expect(code, output()).toBe(0)
      expect(prompts(), output()).toBe(1)
      expect(["a.txt", "b.txt"].map((f) => existsSync(join(box.workspace, f)))).toEqual([true, true])
      const root = goalOf(output())
      const sub = `${root}.1`
      const changed = (log: ReadonlyArray<Json>) => log.filter((e) => e["_tag"] === "OptionsChanged")
      expect(changed(yield* events(root, box.db))).toEqual([])
      expect(changed(yield* events(sub, box.db))).toMatchObject([{ options: { approval: { shell: "auto" } } }])
      for (const id of [root, sub]) expect((yield* rx(["replay", id, "--db", box.db])).code).toBe(0)
    }), 60_000)
})

describe("instructions and limits", () => {
  it.scopedLive("--instructions FILE and --agents-md are recorded and sent; a missing file is one line and records nothing", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([done("ok"), done("ok")])
      const box = sandbox()
      const file = join(box.root, "style.md")
      writeFileSync(file, "Use tabs, never spaces.\n")
      writeFileSync(join(box.workspace, "AGENTS.md"), "Run the tests before you finish.\n")
      const missing = yield* rx(["run", "x", "--instructions", join(box.root, "nope.md"), ...at(box, server)])
      expect(missing.code).toBe(1)
      expect(missing.stderr).toBe(`rx: cannot read the --instructions file ${join(box.root, "nope.md")}: no such file\n`)
      expect(existsSync(box.db)).toBe(false)
      const folder = yield* rx(["run", "x", "--instructions", box.root, ...at(box, server)])
      expect(folder.stderr).toBe(`rx: cannot read the --instructions file ${box.root}: not a regular file\n`)
      expect(existsSync(box.db)).toBe(false)
      const ran = yield* rx(["run", "follow the rules", "--instructions", file, "--agents-md", ...at(box, server)])
      expect(ran.stderr).toBe("")
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain("  instructions 57 characters: Run the tests before you finish. Use tabs, never spaces.")
      const goalId = goalOf(ran.stdout)
      expect((yield* events(goalId, box.db))[0]).toMatchObject({ instructions: "Run the tests before you finish.\n\nUse tabs, never spaces." })
      expect(sent(server, 0)).toContain("Instructions:\\nRun the tests before you finish.\\n\\nUse tabs, never spaces.")
      expect((yield* rx(["inspect", goalId, "--db", box.db])).stdout).toContain("instructions Run the tests before you finish. Use tabs, never spaces. (57 characters)")
      // --agents-md without the file: said, and the run goes on.
      const bare = sandbox()
      const without = yield* rx(["run", "no rules", "--agents-md", ...at(bare, server)])
      expect(without.code).toBe(0)
      expect(without.stderr).toBe(`rx: note: --agents-md: there is no AGENTS.md at the workspace root (${join(bare.workspace, "AGENTS.md")}); running without it\n`)
      expect((yield* events(goalOf(without.stdout), bare.db))[0]?.["instructions"]).toBeUndefined()
    }))

  it.scopedLive("--ask and --deny are checked against the tools offered; bad limits are one line; nothing is recorded", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const base = ["run", "x", "--db", box.db, "--model", "m"]
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
        [["--ask", "shell,rm"], `rx: --ask: there is no tool named "rm" (the tools: read_file, write_file, edit_file, list_dir, find_files, search_text, shell, http_fetch, delegate)\n`],
        [["--ask", "shell", "--deny", "write_file,shell"], "rx: shell is in both --ask and --deny: name each tool once\n"],
        [["--deny", ","], "rx: --deny: expected names, comma-separated, got none\n"],
        [["--max-calls-per-answer", "0"], "rx: --max-calls-per-answer: expected a whole number from 1 up, got \"0\"\n"],
        [["--retries", "100"], "rx: --retries: expected a whole number from 0 to 99, got \"100\"\n"]
      ]
      for (const [flags, message] of cases) {
        const ran = yield* rx([...base, ...flags])
        expect(ran.code, flags.join(" ")).toBe(1)
        expect(ran.stderr, flags.join(" ")).toBe(message)
      }
      expect(existsSync(box.db)).toBe(false)
    }))

  it.scopedLive("--max-calls-per-answer is recorded and followed", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([calls(["list_dir", {}], ["read_file", { path: "hello.txt" }]), done("ok")])
      const box = sandbox()
      const ran = yield* rx(["run", "two calls", "--max-calls-per-answer", "1", ...at(box, server)])
      expect(ran.code).toBe(0)
      const log = yield* events(goalOf(ran.stdout), box.db)
      expect(log[0]).toMatchObject({ options: { maxCallsPerAnswer: 1 } })
      expect(log.find((e) => e["_tag"] === "ActionRejected")).toMatchObject({ kind: "too_many_calls", dropped: 1 })
    }))

  it.scopedLive("--max-iterations raised on rx resume of an open goal is recorded and followed; refused for a goal ended by max_iterations", () =>
    Effect.gen(function*() {
      // Open: the model fails at iteration 2 of 2, so the goal is suspended; resumed with room for 4.
      const server = yield* FakeServer.make([
        call("list_dir", {}),
        FakeServer.error(503, "overloaded"),
        call("list_dir", { path: "." }),
        call("read_file", { path: "hello.txt" }),
        done("done in four")
      ])
      const box = sandbox()
      const first = yield* rx(["run", "look around", "--max-iterations", "2", "--retries", "0", ...at(box, server)])
      expect(first.code).toBe(11)
      const goalId = goalOf(first.stdout)
      const low = yield* rx(["resume", goalId, "--max-iterations", "1", "--db", box.db])
      expect(low.code).toBe(1)
      expect(low.stderr).toBe(`rx: goal ${goalId} has completed 1 iteration already; --max-iterations must be more than that (rx cancel ${goalId} stops it)\n`)
      const resumed = yield* rx(["resume", goalId, "--max-iterations", "4", "--db", box.db])
      expect(resumed.stderr).toBe("")
      expect(resumed.code).toBe(0)
      expect(resumed.stdout).toMatch(/^resuming goal \S+: .*\n(?: {2}.*\n)+settings of this resume, recorded at seq \d+: maxIterations 4 \(was 2\)\n/)
      expect(resumed.stdout).toContain("done after 4 iterations")
      const log = yield* events(goalId, box.db)
      wellFormed(log)
      expect(log.filter((e) => e["_tag"] === "OptionsChanged").map((e) => (e["options"] as Json)["maxIterations"])).toEqual([4])
      expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)

      // Terminated by max_iterations: the log is closed; the resume refuses and appends nothing.
      const ended = yield* FakeServer.make([call("list_dir", {})])
      const other = sandbox()
      const limited = yield* rx(["run", "one step", "--max-iterations", "1", ...at(other, ended)])
      expect(limited.code).toBe(2)
      const endedId = goalOf(limited.stdout)
      const before = yield* events(endedId, other.db)
      const refused = yield* rx(["resume", endedId, "--max-iterations", "5", "--db", other.db])
      expect(refused.code).toBe(1)
      expect(refused.stderr).toBe(
        `rx: goal ${endedId} ended at its iteration limit (max_iterations, 1 iteration) and a terminated goal's log is closed, so --max-iterations cannot extend it: rx run --continue ${endedId} goes on from where it stopped, as a new goal\n`
      )
      const after = yield* events(endedId, other.db)
      expect(after).toEqual(before)
      wellFormed(after)
    }))
})
