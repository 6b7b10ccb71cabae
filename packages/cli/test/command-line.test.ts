/**
 * The command line a person types: one clear line for every mistake (exit 1, nothing recorded),
 * every setting as a flag, an `RX_` variable and a config-file key with a documented
 * precedence, and a help that names rx's commands, shows defaults and prints no escapes into a
 * pipe.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { bin, exec, jsonLines, rx, sandbox, start } from "./helpers.js"

const call = (name: string, args: unknown, content?: string) =>
  FakeServer.completion({ ...(content === undefined ? {} : { content }), toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** A rejected command line: exit 1, one line on stderr naming the problem, no database created. */
const refused = (args: ReadonlyArray<string>, expected: RegExp, env: Record<string, string | undefined> = {}, box = sandbox()) =>
  Effect.gen(function*() {
    const ran = yield* rx([...args, "--db", box.db, "--workspace", box.workspace], env, box.workspace)
    expect(ran.code, `${args.join(" ")}: ${ran.stderr}`).toBe(1)
    expect(ran.stderr.trim().split("\n"), ran.stderr).toHaveLength(1)
    expect(ran.stderr).toMatch(expected)
    expect(ran.stderr).not.toMatch(/└─|Schema|Struct \(|\bat .*\.m?js:\d+/)
    expect(ran.stdout).toBe("")
    expect(existsSync(box.db), `${args.join(" ")} created the database`).toBe(false)
  })

describe("bad input: one line, exit 1, nothing recorded", () => {
  it.scopedLive("settings a run cannot work with", () =>
    Effect.gen(function*() {
      yield* refused(["run", "hi", "--model", "m", "--base-url", "not a url"], /^rx: --base-url: expected an http:\/\/ or https:\/\/ URL .*got "not a url"$/m)
      yield* refused(["run", "hi", "--model", "m", "--base-url", "ftp://example.com/v1"], /--base-url: expected an http:\/\/ or https:\/\/ URL/)
      yield* refused(["run", "hi", "--model", "m"], /RX_BASE_URL: expected an http/, { RX_BASE_URL: "nope" })
      yield* refused(["run", "hi", "--model", "m", "--max-iterations", "0"], /--max-iterations: expected a whole number from 1 up, got "0"/)
      yield* refused(["run", "hi", "--model", "m", "--max-iterations", "-5"], /--max-iterations: expected a whole number from 1 up, got "-5"/)
      yield* refused(["run", "hi", "--model", "m", "--max-iterations", "many"], /--max-iterations: expected a whole number/)
      yield* refused(["run", "hi", "--model", "m", "--temperature", "3"], /--temperature: expected a number from 0 to 2, got "3"/)
      yield* refused(["run", "hi", "--model", ""], /--model: expected a model name, got an empty value/)
      yield* refused(["run", "hi", "--model", "m", "--tools", "read_file,rm_rf"], /--tools: there is no tool named "rm_rf"/)
      yield* refused(["run", "hi", "--model", "m", "--ask", "shel"], /--ask: there is no tool named "shel" \(did you mean shell\?\)/)
      yield* refused(["run", "hi", "--model", "m", "--ask", "shell", "--no-shell"], /--ask: shell is not offered in this goal \(offered: read_file,/)
    }))

  it.scopedLive("goals: empty, whitespace, too long for a prompt, given twice", () =>
    Effect.gen(function*() {
      yield* refused(["run", "", "--model", "m"], /the goal is empty/)
      yield* refused(["run", "  \n\t ", "--model", "m"], /the goal is empty/)
      yield* refused(["run", "--model", "m"], /rx run needs a goal: .*--goal-file FILE.*rx run -/)
      yield* refused(["run", "x".repeat(9_000), "--model", "m"], /the goal is 9000 characters, more than a prompt shows of it \(8000 with --prompt-budget 32000\)/)
      const box = sandbox()
      writeFileSync(join(box.root, "goal.txt"), "a goal")
      yield* refused(["run", "hi", "--goal-file", join(box.root, "goal.txt"), "--model", "m"], /give the goal once/)
      yield* refused(["run", "--goal-file", join(box.root, "missing.txt"), "--model", "m"], /cannot read the goal file .*missing\.txt: no such file/)
    }))

  it.scopedLive("flags and arguments are named as typed", () =>
    Effect.gen(function*() {
      yield* refused(["run", "--frobnicate", "hi"], /^rx: rx run has no flag --frobnicate \(rx run --help lists its flags\)$/m)
      yield* refused(["run", "hi", "--max-iteration", "3"], /rx run has no flag --max-iteration \(did you mean --max-iterations\?\)/)
      yield* refused(["run", "fix", "the", "bug"], /rx run takes one goal: put it in quotes/)
      yield* refused(["run", "hi", "--model"], /--model needs a value: --model NAME/)
      yield* refused(["frob"], /there is no command "frob"/)
      yield* refused(["lst"], /there is no command "lst" \(did you mean list\?\)/)
      yield* refused(["evaluate"], /there is no command "evaluate" \(did you mean eval\?\)/)
      yield* refused(["run", "hi", "--max-iter", "3"], /rx run has no flag --max-iter \(did you mean --max-iterations\?\)/)
      yield* refused(["list", "--json=yes"], /--json takes no value/)
    }))

  it.scopedLive("inspect --step past the last step exits 1", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([call("list_dir", { path: "." }), done("ok")])
      const box = sandbox()
      const ran = yield* rx(["run", "look", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none"])
      expect(ran.code).toBe(0)
      const goalId = /^goal (\S+):/.exec(ran.stdout)?.[1] ?? ""
      const past = yield* rx(["inspect", goalId, "--step", "99", "--db", box.db])
      expect(past.code).toBe(1)
      expect(past.stderr).toMatch(/has no step 99 \(steps 1 to 2\)/)
      const zero = yield* rx(["inspect", goalId, "--step", "0", "--db", box.db])
      expect(zero.code).toBe(1)
      expect((yield* rx(["inspect", goalId, "--step", "2", "--db", box.db])).code).toBe(0)
    }))
})

describe("the goal from a file or standard input", () => {
  it.scopedLive("--goal-file and rx run - record the whole text", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([done("one"), done("two")])
      const box = sandbox()
      const long = `${"Line of a long goal.\n".repeat(200)}The end.`
      writeFileSync(join(box.root, "goal.md"), long)
      const common = ["--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none", "--json"]
      const fromFile = yield* rx(["run", "--goal-file", join(box.root, "goal.md"), ...common])
      expect(fromFile.code, fromFile.stderr).toBe(0)
      expect(jsonLines(fromFile.stdout)[0]).toMatchObject({ _tag: "GoalSubmitted", goal: long })
      const piped = yield* exec(process.execPath, [bin, "run", "-", ...common], { input: "from standard input\n" })
      expect(piped.code, piped.stderr).toBe(0)
      expect(jsonLines(piped.stdout)[0]).toMatchObject({ _tag: "GoalSubmitted", goal: "from standard input" })
    }))
})

describe("every setting as a flag, a variable and a config-file key", () => {
  it.scopedLive("limits, model settings, tools and the allow-list are recorded; precedence flag > env > workspace file > user file > default", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([done("a"), done("b"), done("c")])
      const box = sandbox()
      const configHome = join(box.root, "config")
      mkdirSync(join(configHome, "rx"), { recursive: true })
      writeFileSync(join(configHome, "rx", "config.json"), JSON.stringify({ baseUrl: server.baseUrl, maxIterations: 9, maxFailures: 2, temperature: 0.5, sandbox: "none", httpAllow: ["10.0.0.0/8"] }))
      writeFileSync(join(box.workspace, "rx.config.json"), JSON.stringify({ model: "from-workspace", maxIterations: 7, tools: ["read_file", "list_dir"] }))
      const env = { XDG_CONFIG_HOME: configHome }
      const run = (args: ReadonlyArray<string>, extra: Record<string, string> = {}) =>
        Effect.map(rx(["run", "hi", "--db", box.db, "--workspace", box.workspace, "--json", ...args], { ...env, ...extra }), (ran) => {
          expect(ran.code, ran.stderr).toBe(0)
          return jsonLines(ran.stdout)[0] as { options: Record<string, unknown> & { settings: Record<string, unknown> }; tools: ReadonlyArray<{ name: string }> }
        })
      const files = yield* run([])
      expect(files.options).toMatchObject({ maxIterations: 7, maxConsecutiveFailures: 2 })
      expect(files.options.settings).toMatchObject({ model: "from-workspace", baseUrl: server.baseUrl, temperature: 0.5, sandbox: "none", tools: ["read_file", "list_dir"], httpAllow: ["10.0.0.0/8"] })
      expect(files.tools.map((t) => t.name).sort()).toEqual(["list_dir", "read_file"])
      const envWins = yield* run([], { RX_MAX_ITERATIONS: "6", RX_MODEL: "from-env" })
      expect(envWins.options).toMatchObject({ maxIterations: 6 })
      expect(envWins.options.settings).toMatchObject({ model: "from-env" })
      const flagWins = yield* run(["--max-iterations", "5", "--max-malformed", "4", "--max-repeats", "5", "--no-progress-window", "6", "--prompt-budget", "4000", "--max-total-tokens", "1000", "--max-answer-chars", "5000", "--max-calls-per-answer", "2", "--max-output-tokens", "256", "--tools", "read_file,shell", "--no-shell"], { RX_MAX_ITERATIONS: "6" })
      expect(flagWins.options).toMatchObject({ maxIterations: 5, maxMalformed: 4, maxRepeats: 5, noProgressWindow: 6, promptBudget: 4000, maxTotalTokens: 1000, maxAnswerChars: 5000, maxCallsPerAnswer: 2 })
      expect(flagWins.options.settings).toMatchObject({ maxOutputTokens: 256, tools: ["read_file"] })
      // The model server saw the sampling settings.
      expect(server.received.at(-1)?.body).toMatchObject({ temperature: 0.5, max_tokens: 256 })
      const shown = yield* rx(["config", "--workspace", box.workspace, "--json"], { ...env, RX_MAX_ITERATIONS: "6" }, box.workspace)
      expect(shown.code, shown.stderr).toBe(0)
      const settings = (JSON.parse(shown.stdout) as { settings: Record<string, { value: unknown; from: string }> }).settings
      expect(settings["maxIterations"]).toEqual({ value: "6", from: "env RX_MAX_ITERATIONS" })
      expect(settings["model"]).toEqual({ value: "from-workspace", from: join(box.workspace, "rx.config.json") })
      expect(settings["maxFailures"]).toEqual({ value: "2", from: join(configHome, "rx", "config.json") })
      expect(settings["maxRepeats"]).toEqual({ value: "3", from: "default" })
      const human = yield* rx(["config", "--workspace", box.workspace, "--model", "flagged"], env, box.workspace)
      expect(human.stdout).toMatch(/^model\s+flagged\s+flag$/m)
    }))

  it.scopedLive("a config file with an unknown key or a bad value is refused, naming the file and the key", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const file = join(box.workspace, "rx.config.json")
      writeFileSync(file, JSON.stringify({ model: "m", maxIteration: 3 }))
      yield* refused(["run", "hi"], /config file .*rx\.config\.json: unknown setting "maxIteration" \(did you mean maxIterations\?\)/, {}, box)
      writeFileSync(file, JSON.stringify({ model: "m", maxIterations: 0 }))
      yield* refused(["run", "hi"], /rx\.config\.json: maxIterations: expected a whole number from 1 up, got 0/, {}, box)
      writeFileSync(file, JSON.stringify({ model: "m", apiKey: "sk-1" }))
      yield* refused(["run", "hi"], /apiKey cannot be set in a config file/, {}, box)
      // What a cloned repository (or an earlier goal) could use against the user is not the workspace's to set.
      for (const loosen of [{ sandbox: "none" }, { httpAllow: ["169.254.169.254"] }, { baseUrl: "https://collector.example/v1" }, { instructions: "../../.ssh/id_rsa" }]) {
        writeFileSync(file, JSON.stringify({ model: "m", ...loosen }))
        yield* refused(["run", "hi"], new RegExp(`${Object.keys(loosen)[0]} cannot be set in a workspace's config file`), {}, box)
      }
      writeFileSync(file, "{ model: m }")
      yield* refused(["run", "hi"], /rx\.config\.json is not valid JSON/, {}, box)
    }))

  it.scopedLive("the agent cannot rewrite the workspace's config file", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const file = join(box.workspace, "rx.config.json")
      writeFileSync(file, JSON.stringify({ ask: ["shell"] }))
      const server = yield* FakeServer.make([
        call("write_file", { path: "rx.config.json", content: "{\"sandbox\":\"none\"}" }),
        call("edit_file", { path: "sub/../rx.config.json", old_text: "shell", new_text: "read_file" }),
        done("tried")
      ])
      const ran = yield* rx(["run", "loosen your settings", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none", "--json"])
      const failed = jsonLines(ran.stdout).filter((e) => e["_tag"] === "ToolFailed")
      expect(failed).toHaveLength(2)
      expect(readFileSync(file, "utf8")).toBe(JSON.stringify({ ask: ["shell"] }))
    }))
})

/** Run rx where no trusted bubblewrap works (a private mount namespace masks it), or say why not. */
const withoutBwrap = (() => {
  const probe = spawnSync("unshare", ["--mount", "--propagation", "private", "sh", "-c", "mount --bind /dev/null /usr/bin/bwrap && true"])
  return probe.status === 0 ? undefined : `unshare cannot mask bubblewrap here (${String(probe.stderr).trim() || `status ${probe.status}`})`
})()

describe("the tools", () => {
  it.scopedLive.skipIf(withoutBwrap !== undefined)("without a usable bubblewrap, shell is not offered and rx says why at start", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([call("shell", { command: "id" }), done("no shell then")])
      const box = sandbox()
      const masked = (args: ReadonlyArray<string>) =>
        exec("unshare", ["--mount", "--propagation", "private", "sh", "-c", `mount --bind /dev/null /usr/bin/bwrap && exec "$0" "$@"`, process.execPath, bin, ...args])
      const ran = yield* masked(["run", "who am I", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--json"])
      expect(ran.code, ran.stderr).toBe(0)
      expect(ran.stderr).toMatch(/^rx: note: shell is not offered: the bubblewrap sandbox cannot be used: .*--sandbox none/m)
      const events = jsonLines(ran.stdout)
      expect((events[0]?.["tools"] as ReadonlyArray<{ name: string }>).map((t) => t.name)).not.toContain("shell")
      expect(events.find((e) => e["_tag"] === "ActionRejected")).toMatchObject({ kind: "unknown_tool" })
      expect(events.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      const asked = yield* masked(["run", "hi", "--db", box.db, "--workspace", box.workspace, "--model", "fake", "--tools", "shell,read_file"])
      expect(asked.code).toBe(1)
      expect(asked.stderr).toMatch(/^rx: --tools names shell, which cannot run here: the bubblewrap sandbox cannot be used/)
    }))
  if (withoutBwrap !== undefined) it.skip(`shell without bubblewrap: ${withoutBwrap}`, () => {})
})

describe("help", () => {
  it.scopedLive("names rx's commands, shows defaults, offers no --wizard, prints no escapes into a pipe", () =>
    Effect.gen(function*() {
      const top = yield* rx(["--help"])
      expect(top.code).toBe(0)
      expect(top.stdout).not.toMatch(/\u001b/)
      expect(top.stdout).toMatch(/^ {2}run +run a goal/m)
      expect(top.stdout).toContain("~/.local/state/rx/rx.db")
      const run = yield* rx(["run", "--help"])
      expect(run.code).toBe(0)
      expect(run.stdout).not.toMatch(/\u001b|\$ run|--wizard|--completions|A user-defined piece of text/)
      expect(run.stdout).toContain("rx run [flags] \"<goal>\"")
      expect(run.stdout).toMatch(/--max-iterations N +iterations the goal may take \(default 50; env\s+RX_MAX_ITERATIONS\)/)
      for (const flag of ["--max-failures", "--max-malformed", "--max-repeats", "--no-progress-window", "--prompt-budget", "--temperature", "--max-output-tokens", "--timeout", "--retries", "--tools", "--no-shell", "--http-allow", "--goal-file"]) {
        expect(run.stdout, flag).toContain(flag)
      }
      expect((yield* rx(["help", "resume"])).stdout).toContain("rx resume [flags] <goal-id>")
      expect((yield* rx([])).stdout).toContain("rx <command> [flags]")
    }))

  it.scopedLive("on a terminal: bold headings, none with NO_COLOR", () =>
    Effect.gen(function*() {
      // `script` gives rx a pseudo-terminal, as a person's shell would.
      const onTerminal = (env: Record<string, string>) =>
        Effect.map(exec("script", ["-qec", `${process.execPath} ${bin} --help`, "/dev/null"], { env }), (ran) => ran.stdout)
      expect(yield* onTerminal({})).toContain("\u001b[1musage\u001b[0m")
      expect(yield* onTerminal({ NO_COLOR: "1" })).not.toMatch(/\u001b\[/)
    }))
})

describe("rx demo", () => {
  it.scopedLive("shows the sandbox a real run would use: mode auto, and what it means here, as rx config says", () =>
    Effect.gen(function*() {
      const demo = yield* rx(["demo"])
      expect(demo.code).toBe(0)
      const config = yield* rx(["config"])
      const here = config.stdout.split("\n").find((l) => l.startsWith("sandbox auto here: ")) ?? "?"
      expect(demo.stdout).toContain(`  ${here}\n`)
      expect(demo.stdout).toMatch(/^ {2}model scripted demo model at \(none\), workspace \S+, sandbox auto$/m)
      expect(demo.stdout).not.toContain("sandbox none")
    }))

  it.scopedLive("removes its folder unless --keep; --json prints only JSON", () =>
    Effect.gen(function*() {
      const folder = (out: string) => /workspace (\S+)/.exec(out)?.[1] ?? ""
      const plain = yield* rx(["demo"])
      expect(plain.code).toBe(0)
      expect(folder(plain.stdout)).not.toBe("")
      expect(existsSync(folder(plain.stdout))).toBe(false)
      const kept = yield* rx(["demo", "--keep"])
      expect(existsSync(join(folder(kept.stdout), "notes.txt"))).toBe(true)
      const json = yield* rx(["demo", "--json"])
      expect(json.code).toBe(0)
      const lines = json.stdout.trim().split("\n")
      expect(lines.length).toBeGreaterThan(5)
      for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow()
      expect(JSON.parse(lines.at(-1) ?? "{}")).toMatchObject({ _tag: "Terminated", reason: "done" })
    }))
})

describe("rx reads the same log everywhere", () => {
  it.scopedLive("RX_DB set but empty is the default log, for every command", () =>
    Effect.gen(function*() {
      const state = mkdtempSync(join(tmpdir(), "rx-state-"))
      const listed = yield* rx(["list"], { RX_DB: "", XDG_STATE_HOME: state })
      expect(listed.code, listed.stderr).toBe(0)
      expect(listed.stdout).toContain(`no log at ${join(state, "rx", "rx.db")} yet`)
      const inspected = yield* rx(["inspect", "nope"], { RX_DB: "", XDG_STATE_HOME: state })
      expect(inspected.code, inspected.stderr).toBe(1)
      expect(inspected.stderr).toContain(`no rx database at ${join(state, "rx", "rx.db")}`)
      const child = start(["cancel", "nope", "--db", join(state, "new", "dir", "x.db")])
      const cancelled = yield* Effect.promise(() => child.done)
      expect(cancelled.code).toBe(1)
      expect(existsSync(join(state, "new"))).toBe(false)
    }))
})
