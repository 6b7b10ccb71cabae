/**
 * A log this user cannot write (a colleague's copy, a backup, a read-only mount) is still read by
 * `rx list`, `inspect`, `replay` and `doctor`, through the built binary: one line says how it was
 * opened, and nothing is written beside it. The folder is really read-only to the reading
 * process: run as root, the commands run as `nobody` (root ignores permission bits); otherwise
 * the folder is made 0555.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { chmodSync, readdirSync, rmSync } from "node:fs"
import { dirname } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { bin, exec, jsonLines, rx, sandbox, start } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })

const asRoot = process.getuid?.() === 0

/** Run `rx args...` as a user who cannot write the log's folder. */
const rxReader = (args: ReadonlyArray<string>) =>
  asRoot
    ? exec("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, bin, ...args], { env: { HOME: "/nonexistent" } })
    : rx(args)

/** Make the log's folder (and its parents in the sandbox) readable to the reader and not writable by it. */
const readOnly = (db: string, root: string) => {
  chmodSync(root, 0o755)
  chmodSync(dirname(db), asRoot ? 0o755 : 0o555)
}

const copied = /read from a private copy/

/** The commands the issue names, each on the log at `db`: all exit 0 and say once how the log was opened. */
const readAll = (db: string, goalId: string, expectCopy: boolean) =>
  Effect.gen(function*() {
    const before = readdirSync(dirname(db)).sort()
    const list = yield* rxReader(["list", "--json", "--db", db])
    expect(list.code, list.stderr).toBe(0)
    expect(jsonLines(list.stdout).map((g) => g["goalId"])).toEqual([goalId])
    const inspect = yield* rxReader(["inspect", goalId, "--db", db])
    expect(inspect.code, inspect.stderr).toBe(0)
    expect(inspect.stdout).toContain(goalId)
    const replay = yield* rxReader(["replay", goalId, "--db", db])
    expect(replay.code, replay.stderr).toBe(0)
    const doctor = yield* rxReader(["doctor", "--db", db])
    expect(doctor.code, doctor.stdout + doctor.stderr).toBe(0)
    expect(doctor.stdout).not.toMatch(/problem/)
    for (const ran of [list, inspect, replay, doctor]) {
      const notes = ran.stderr.split("\n").filter((l) => copied.test(l))
      expect(notes, ran.stderr).toHaveLength(expectCopy ? 1 : 0)
      expect(ran.stderr).not.toMatch(/read-only|readonly/)
    }
    // Nothing was written beside the log: no -wal, no -shm, no journal, no folder.
    expect(readdirSync(dirname(db)).sort()).toEqual(before)
  })

describe("a log in a folder this user cannot write", () => {
  it.scopedLive("a finished goal's log (no -wal file) is read from a private copy, said in one line", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([call("read_file", { path: "hello.txt" }), call("done", { summary: "read it" })])
      const box = sandbox()
      const ran = yield* rx(["run", "read hello.txt", "--json", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none"])
      expect(ran.code, ran.stderr).toBe(0)
      const goalId = String(jsonLines(ran.stdout)[0]?.["goalId"])
      expect(readdirSync(box.root).filter((n) => n.startsWith("rx.db"))).toEqual(["rx.db"])
      readOnly(box.db, box.root)
      yield* readAll(box.db, goalId, true)
    }))

  it.scopedLive("a killed run's log (its commits only in the -wal file) is read whole, the -wal file included", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([call("read_file", { path: "hello.txt" }), call("done", { summary: "read it" })])
      const box = sandbox()
      // Killed (SIGKILL) right after its third commit: the log's goal is in the -wal file only.
      const child = start(["run", "read hello.txt", "--json", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none"], {
        RX_CRASH_AFTER_COMMITS: "3"
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
      const ran = yield* Effect.promise(() => child.done)
      expect(ran.signal).toBe("SIGKILL")
      const goalId = String(jsonLines(ran.stdout)[0]?.["goalId"])
      expect(readdirSync(box.root).filter((n) => n.startsWith("rx.db")).sort()).toEqual(["rx.db", "rx.db-shm", "rx.db-wal"])
      // With its -shm file beside it, SQLite reads it in place, writing nothing.
      readOnly(box.db, box.root)
      yield* readAll(box.db, goalId, false)
      // Without it (copied without it, or removed), SQLite cannot build the index there: a copy is read, the -wal file with it.
      chmodSync(box.root, 0o755)
      rmSync(`${box.db}-shm`)
      readOnly(box.db, box.root)
      yield* readAll(box.db, goalId, true)
    }))
})
