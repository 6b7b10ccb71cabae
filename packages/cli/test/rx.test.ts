import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { crc32 } from "node:zlib"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox, start, until } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** A goal run against a fake server: `rx run ... --json`, returning the sandbox and the events. */
const runGoal = (steps: ReadonlyArray<FakeServer.Step>, extra: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const server = yield* FakeServer.make(steps)
    const box = sandbox()
    const ran = yield* rx(["run", "read hello.txt", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none", ...extra])
    return { box, ran, server }
  })

describe("rx run", () => {
  it.scopedLive("prints one line per step and exits 0 on done", () =>
    Effect.gen(function*() {
      const { box, ran, server } = yield* runGoal([call("read_file", { path: "hello.txt" }), done("read it")])
      expect(ran.stderr).toBe("")
      expect(ran.code).toBe(0)
      expect(ran.stdout).toMatch(/^goal g\w+: read hello.txt/)
      expect(ran.stdout).toMatch(/\n\s+1\s+read_file\s+\{"path":"hello.txt"\}\s+ok\s+\d+ ms/)
      expect(ran.stdout).toContain("done after 2 iterations")
      expect(ran.stdout).toContain("read it")
      // Every request the server got was valid for the API.
      expect(server.received.map((r) => r.invalid)).toEqual([undefined, undefined])
      // The second request carried the file's content back to the model.
      expect(JSON.stringify(server.received[1]?.body)).toContain("hello from the workspace")
      const db = new Database(box.db, { readonly: true })
      expect(db.prepare("PRAGMA integrity_check").pluck().get()).toBe("ok")
      db.close()
    }))

  it.scopedLive("--json prints each event as one JSON line, the encoding rx events prints", () =>
    Effect.gen(function*() {
      const { box, ran } = yield* runGoal([call("list_dir", {}), done("listed")], ["--json"])
      expect(ran.code).toBe(0)
      const lines = jsonLines(ran.stdout)
      expect(lines.map((e) => e["_tag"])).toEqual([
        "GoalSubmitted", "ModelResponded", "ToolStarted", "ToolSucceeded", "IterationCompleted",
        "ModelResponded", "IterationCompleted", "Terminated"
      ])
      expect(lines.map((e) => e["seq"])).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
      const goalId = String(lines[0]?.["goalId"])
      const events = yield* rx(["events", goalId, "--db", box.db])
      expect(events.stdout).toBe(ran.stdout)
    }))

  it.scopedLive("a distinct exit code per reason: malformed_output 5, max_iterations 2", () =>
    Effect.gen(function*() {
      const talk = FakeServer.completion({ content: "I think I should read the file." })
      const malformed = yield* runGoal([talk, talk, talk])
      expect(malformed.ran.code).toBe(5)
      expect(malformed.ran.stdout).toContain("malformed_output after 3 iterations")
      const limited = yield* runGoal([call("list_dir", {}), call("read_file", { path: "hello.txt" })], ["--max-iterations", "2"])
      expect(limited.ran.code).toBe(2)
      expect(limited.ran.stdout).toContain("max_iterations")
    }))

  it.scopedLive("no model server: a clear message, exit 11, the goal suspended (model_unavailable), open", () =>
    Effect.gen(function*() {
      const port = yield* FakeServer.freePort
      const box = sandbox()
      const ran = yield* rx(["run", "x", "--db", box.db, "--workspace", box.workspace, "--base-url", `http://127.0.0.1:${port}/v1`, "--model", "m"])
      expect(ran.code).toBe(11)
      expect(ran.stdout).toContain(`cannot reach http://127.0.0.1:${port}/v1`)
      expect(ran.stdout).toContain("suspended (model_unavailable), open")
      expect(ran.stdout + ran.stderr).not.toMatch(/\n\s+at /)
    }), 120_000)

  it.scopedLive("bad flags and a missing model are errors a user can act on, exit 1, no stack trace", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const noModel = yield* rx(["run", "x", "--db", box.db])
      expect(noModel.code).toBe(1)
      expect(noModel.stderr).toContain("pass --model")
      // A run refused for its flags creates no database.
      expect(existsSync(box.db)).toBe(false)
      const badFlag = yield* rx(["run", "x", "--max-iterations", "many", "--db", box.db])
      expect(badFlag.code).toBe(1)
      expect(badFlag.stdout + badFlag.stderr).not.toMatch(/\n\s+at /)
      // A database that cannot be created (its folder would be inside a file).
      const badDb = yield* rx(["run", "x", "--model", "m", "--db", join(box.workspace, "hello.txt", "rx.db")])
      expect(badDb.code).toBe(1)
      expect(badDb.stderr).toMatch(/^rx: cannot create the folder of the database .*hello\.txt/)
    }))
})

describe("rx inspect, list, events, replay", () => {
  it.scopedLive("inspect shows the steps, the tool trace and the termination audit; replay verifies", () =>
    Effect.gen(function*() {
      const { box, ran } = yield* runGoal([call("read_file", { path: "missing.txt" }), call("read_file", { path: "hello.txt" }), done("ok")], ["--json"])
      expect(ran.code).toBe(0)
      const goalId = String(jsonLines(ran.stdout)[0]?.["goalId"])
      const inspected = yield* rx(["inspect", goalId, "--db", box.db])
      expect(inspected.code).toBe(0)
      expect(inspected.stdout).toContain(`goal      ${goalId}`)
      expect(inspected.stdout).toContain("step 1")
      expect(inspected.stdout).toMatch(/error\s+recoverable: .*missing.txt/)
      expect(inspected.stdout).toContain("tool trace")
      expect(inspected.stdout).toMatch(/termination\n\s+reason\s+done/)
      const one = yield* rx(["inspect", goalId, "--step", "2", "--db", box.db])
      expect(one.stdout).toContain("hello from the workspace")
      const listed = yield* rx(["list", "--db", box.db])
      expect(listed.stdout).toContain(goalId)
      expect(listed.stdout).toMatch(/terminated\(done\)\s+3 it/)
      // Each label of the header stands over its column: the count ends where ITER does, the dates start where STARTED and ENDED do.
      const [header = "", line = ""] = listed.stdout.split("\n")
      expect(line.indexOf(" it ") - 1).toBe(header.indexOf("ITER") + 3)
      for (const label of ["STATUS", "STARTED", "ENDED", "TEXT"]) expect(line[header.indexOf(label) - 1]).toBe(" ")
      expect(line.slice(header.indexOf("STARTED"))).toMatch(/^\d{4}-\d\d-\d\dT/)
      expect(line.slice(header.indexOf("ENDED"))).toMatch(/^\d{4}-\d\d-\d\dT/)
      const listedJson = jsonLines((yield* rx(["list", "--json", "--db", box.db])).stdout)
      expect(listedJson[0]).toMatchObject({ goalId, status: "terminated", reason: "done", iterations: 3 })
      const replayed = yield* rx(["replay", goalId, "--db", box.db])
      expect(replayed.code).toBe(0)
      expect(replayed.stdout).toContain("identical")
      // Tamper with a recorded output (its checksum, CRC-32 of the payload, made to match): replay names the first event that no longer follows.
      const db = new Database(box.db)
      const row = db.prepare("SELECT seq, payload FROM events WHERE goal_id = ? AND tag = 'ToolSucceeded'").get(goalId) as { seq: number; payload: string }
      const tampered = row.payload.replace("hello from the workspace", "tampered")
      db.prepare("UPDATE events SET payload = ?, checksum = ? WHERE goal_id = ? AND seq = ?").run(tampered, crc32(tampered) | 0, goalId, row.seq)
      db.close()
      const diverged = yield* rx(["replay", goalId, "--db", box.db])
      expect(diverged.code).toBe(8)
      expect(diverged.stdout).toContain(`diverged at seq ${row.seq + 1}`)
    }))

  it.scopedLive("a missing database and an unknown goal id are clear errors; only rx run creates a file", () =>
    Effect.gen(function*() {
      const box = sandbox()
      for (const command of ["inspect", "events", "replay", "cancel", "resume"]) {
        const ran = yield* rx([command, "g-nope", "--db", box.db])
        expect(ran.code, command).toBe(1)
        expect(ran.stderr, command).toContain(`no rx database at ${box.db}`)
      }
      // rx list before any run: an empty list, where no log is yet, exit 0.
      const listed = yield* rx(["list", "--db", box.db])
      expect(listed.code, listed.stderr).toBe(0)
      expect(listed.stdout).toBe(`no goals yet: no log at ${box.db} yet (rx run "<goal>" starts a goal and creates it there; --db or RX_DB names another log)\n`)
      expect((yield* rx(["list", "--json", "--db", box.db])).stdout).toBe("")
      expect(existsSync(box.db)).toBe(false)
      const { box: made } = yield* runGoal([done("ok")])
      for (const command of ["cancel", "inspect", "events", "replay", "resume"]) {
        const ran = yield* rx([command, "g-nope", "--db", made.db])
        expect(ran.code, command).toBe(1)
        expect(ran.stderr, command).toContain("no goal with id g-nope")
      }
    }))
})

/** `rx run --json` in the background against `steps`; returns once `requests` reached the server. */
const startRun = (steps: ReadonlyArray<FakeServer.Step>, requests: number) =>
  Effect.gen(function*() {
    const server = yield* FakeServer.make(steps)
    const box = sandbox()
    const running = start(["run", "x", "--json", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "m", "--sandbox", "none"])
    yield* server.waitFor(requests)
    const goalId = String(jsonLines(running.output().stdout)[0]?.["goalId"])
    return { box, goalId, running, server }
  })

describe("cancel and resume across processes", () => {
  it.scopedLive("rx cancel stops a goal running in another process, recorded as CancelRequested", () =>
    Effect.gen(function*() {
      const { box, goalId, running } = yield* startRun([call("list_dir", {}), { kind: "stall" }], 2)
      const cancelled = yield* rx(["cancel", goalId, "--db", box.db])
      expect(cancelled.code).toBe(0)
      expect(cancelled.stdout).toContain("cancel requested")
      const ran = yield* Effect.promise(() => running.done)
      expect(ran.code).toBe(7)
      const tags = jsonLines(ran.stdout).map((e) => e["_tag"])
      expect(tags.slice(-2)).toEqual(["CancelRequested", "Terminated"])
      expect(jsonLines(ran.stdout).at(-1)).toMatchObject({ reason: "cancelled" })
    }))

  it.scopedLive("Ctrl-C cancels gracefully: the log ends with Terminated(cancelled)", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([{ kind: "stall" }])
      const box = sandbox()
      const running = start(["run", "x", "--json", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "m"])
      yield* server.waitFor(1)
      running.kill("SIGINT")
      const ran = yield* Effect.promise(() => running.done)
      expect(ran.code).toBe(7)
      const lines = jsonLines(ran.stdout)
      expect(lines.at(-1)).toMatchObject({ _tag: "Terminated", reason: "cancelled", detail: "cancelled by Ctrl-C" })
      const goalId = String(lines[0]?.["goalId"])
      const events = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout)
      expect(events.map((e) => e["_tag"])).toEqual(["GoalSubmitted", "CancelRequested", "Terminated"])
    }))

  it.scopedLive("a killed run resumes with its recorded settings and finishes", () =>
    Effect.gen(function*() {
      const { box, goalId, running } = yield* startRun([call("read_file", { path: "hello.txt" }), { kind: "stall" }, done("resumed and done")], 2)
      running.kill("SIGKILL")
      yield* Effect.promise(() => running.done)
      const listed = jsonLines((yield* rx(["list", "--json", "--db", box.db])).stdout)
      expect(listed[0]).toMatchObject({ goalId, status: "open" })
      const resumed = yield* rx(["resume", goalId, "--db", box.db])
      expect(resumed.code).toBe(0)
      expect(resumed.stdout).toContain("resumed and done")
      const events = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout)
      expect(events.map((e) => e["seq"])).toEqual(events.map((_, i) => i))
      expect(events.filter((e) => e["_tag"] === "Terminated")).toHaveLength(1)
      // The same settings as recorded: nothing to record.
      expect(events.filter((e) => e["_tag"] === "OptionsChanged")).toEqual([])
      expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)
    }))

  it.scopedLive("a resume with other settings records them (OptionsChanged) before it runs; inspect shows what each resume used", () =>
    Effect.gen(function*() {
      const { box, goalId, running, server } = yield* startRun([call("read_file", { path: "hello.txt" }), { kind: "stall" }, { kind: "stall" }, done("resumed and done")], 2)
      running.kill("SIGKILL")
      yield* Effect.promise(() => running.done)
      const before = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout).length
      // First resume: another model and sandbox; killed again while it waits for the model.
      const first = start(["resume", goalId, "--json", "--model", "m2", "--sandbox", "auto", "--db", box.db])
      yield* server.waitFor(3)
      first.kill("SIGKILL")
      const firstRan = yield* Effect.promise(() => first.done)
      const changed = jsonLines(firstRan.stdout)[0]
      expect(changed).toMatchObject({ _tag: "OptionsChanged", seq: before, options: { settings: { model: "m2", sandbox: "auto", workspace: box.workspace } } })
      // Second resume: back to sandbox none, with the model recorded by the first; human output says what changed.
      const second = yield* rx(["resume", goalId, "--sandbox", "none", "--db", box.db])
      expect(second.code).toBe(0)
      expect(second.stdout).toMatch(/^resuming goal \S+: .*\n(?: {2}.*\n)+settings of this resume, recorded at seq \d+: sandbox none \(was auto\)\n/)
      const events = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout)
      const changes = events.filter((e) => e["_tag"] === "OptionsChanged")
      expect(changes.map((e) => (e["options"] as { settings: unknown }).settings)).toMatchObject([
        { model: "m2", sandbox: "auto" },
        { model: "m2", sandbox: "none" }
      ])
      expect(events.map((e) => e["seq"])).toEqual(events.map((_, i) => i))
      const inspected = yield* rx(["inspect", goalId, "--db", box.db])
      expect(inspected.stdout).toMatch(/\nsettings  workspace=.*, sandbox=none, baseUrl=.*, model=m, mode=tools\n/)
      expect(inspected.stdout).toMatch(/\nchanged   seq \d+ \(.*, after iteration 1\): sandbox auto \(was none\), model m2 \(was m\)\n {10}seq \d+ \(.*\): sandbox none \(was auto\)\n/)
      expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)
    }))

  it.scopedLive("rx events --follow tails a running goal until it terminates", () =>
    Effect.gen(function*() {
      const { box, goalId, running } = yield* startRun([call("list_dir", {}), { kind: "stall" }], 2)
      const follower = start(["events", goalId, "--follow", "--db", box.db])
      yield* until(() => jsonLines(follower.output().stdout).length >= 5, "the follower to print the first iteration")
      yield* rx(["cancel", goalId, "--db", box.db])
      const followed = yield* Effect.promise(() => follower.done)
      expect(followed.code).toBe(0)
      expect(jsonLines(followed.stdout).at(-1)).toMatchObject({ _tag: "Terminated", reason: "cancelled" })
      yield* Effect.promise(() => running.done)
    }))
})

describe("rx demo", () => {
  it.scopedLive("runs a complete goal with a scripted model, real tools and SQLite, then inspect and replay", () =>
    Effect.gen(function*() {
      const ran = yield* rx(["demo", "--keep"])
      expect(ran.stderr).toBe("")
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain("SCRIPTED")
      expect(ran.stdout).toContain("edit_file")
      expect(ran.stdout).toContain("termination")
      expect(ran.stdout).toContain("identical")
      const workspace = /workspace (\S+)/.exec(ran.stdout)?.[1] ?? ""
      expect(readFileSync(join(workspace, "notes.txt"), "utf8")).toContain("Summary: every step is logged")
    }))
})
