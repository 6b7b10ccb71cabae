/**
 * Where rx keeps its log and what it refuses to use as one, through the built binary: the
 * per-user default, `RX_DB` and `--db`, the note about a log of an earlier rx, 0-byte,
 * foreign and damaged files, and `rx doctor`.
 */
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** `rx run` (no --db unless in `extra`) against a fake server; returns the run and its goal id. */
const runGoal = (env: Record<string, string | undefined>, extra: ReadonlyArray<string> = [], cwd?: string) =>
  Effect.gen(function*() {
    const server = yield* FakeServer.make([call("read_file", { path: "hello.txt" }), done("read it")])
    const box = sandbox()
    const ran = yield* rx(["run", "read hello.txt", "--json", "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none", ...extra], env, cwd)
    return { box, ran, goalId: String(jsonLines(ran.stdout)[0]?.["goalId"]) }
  })

const temp = (prefix: string) => mkdtempSync(join(tmpdir(), prefix))

describe("the default log", () => {
  it.scopedLive("lives in $XDG_STATE_HOME/rx/rx.db (folder 0700), else ~/.local/state/rx/rx.db; RX_DB and --db override, an empty RX_DB does not", () =>
    Effect.gen(function*() {
      const state = temp("rx-xdg-")
      const first = yield* runGoal({ XDG_STATE_HOME: state })
      expect(first.ran.code).toBe(0)
      const file = join(state, "rx", "rx.db")
      expect(existsSync(file)).toBe(true)
      expect(statSync(join(state, "rx")).mode & 0o777).toBe(0o700)
      // An empty RX_DB is unset: the same default log.
      const listed = yield* rx(["list", "--json"], { XDG_STATE_HOME: state, RX_DB: "" })
      expect(listed.code).toBe(0)
      expect(jsonLines(listed.stdout).map((g) => g["goalId"])).toEqual([first.goalId])
      // RX_DB, then --db, win over the default.
      const other = join(temp("rx-env-"), "env.db")
      expect((yield* runGoal({ XDG_STATE_HOME: state, RX_DB: other })).ran.code).toBe(0)
      expect(existsSync(other)).toBe(true)
      const flagged = join(temp("rx-flag-"), "flag.db")
      expect((yield* runGoal({ XDG_STATE_HOME: state, RX_DB: other }, ["--db", flagged])).ran.code).toBe(0)
      expect(jsonLines((yield* rx(["list", "--json", "--db", flagged])).stdout)).toHaveLength(1)
      expect(jsonLines((yield* rx(["list", "--json"], { XDG_STATE_HOME: state })).stdout)).toHaveLength(1)
      // No XDG_STATE_HOME (or a relative one): under HOME.
      const home = temp("rx-home-")
      expect((yield* runGoal({ XDG_STATE_HOME: undefined, HOME: home })).ran.code).toBe(0)
      expect(existsSync(join(home, ".local", "state", "rx", "rx.db"))).toBe(true)
      expect((yield* runGoal({ XDG_STATE_HOME: "relative/state", HOME: home })).ran.code).toBe(0)
      expect(jsonLines((yield* rx(["list", "--json"], { XDG_STATE_HOME: undefined, HOME: home })).stdout)).toHaveLength(2)
    }))

  it.scopedLive("rx --help says where the log lives", () =>
    Effect.gen(function*() {
      const help = yield* rx(["--help"])
      expect(help.stdout).toContain("$XDG_STATE_HOME/rx/rx.db")
      expect(help.stdout).toContain("~/.local/state/rx/rx.db")
    }))

  it.scopedLive("a log of an earlier rx in ./.rx/rx.db: a one-line note, never used silently", () =>
    Effect.gen(function*() {
      const folder = temp("rx-legacy-")
      mkdirSync(join(folder, ".rx"))
      const legacy = join(folder, ".rx", "rx.db")
      const state = temp("rx-xdg-")
      yield* runGoal({ XDG_STATE_HOME: state }, ["--db", legacy])
      const before = readFileSync(legacy)
      const listed = yield* rx(["list", "--json"], { XDG_STATE_HOME: state }, folder)
      expect(listed.code).toBe(0)
      expect(listed.stderr.split("\n")[0]).toBe(
        `rx: note: ${legacy} is a log of an earlier rx, which kept it in the current folder; this rx uses ${join(state, "rx", "rx.db")}. To keep using the old log, pass --db ${legacy} (or set RX_DB), best after moving it out of the workspace`
      )
      // No log at the default place yet: an empty list.
      expect(listed.stdout).toBe("")
      expect(readFileSync(legacy).equals(before)).toBe(true)
      // Named explicitly, it is used, with no note.
      const used = yield* rx(["list", "--json", "--db", ".rx/rx.db"], { XDG_STATE_HOME: state }, folder)
      expect(used.stderr).toBe("")
      expect(jsonLines(used.stdout)).toHaveLength(1)
    }))
})

describe("files that are not a usable log", () => {
  it.scopedLive("a 0-byte file is refused by run, resume, cancel, list, inspect, events, replay, and stays 0 bytes", () =>
    Effect.gen(function*() {
      const box = sandbox()
      writeFileSync(box.db, "")
      for (const args of [["run", "x", "--model", "m"], ["resume", "g1"], ["cancel", "g1"], ["list"], ["inspect", "g1"], ["events", "g1"], ["replay", "g1"]]) {
        const ran = yield* rx([...args, "--db", box.db])
        expect(ran.code, args[0]).toBe(1)
        expect(ran.stderr, args[0]).toBe(
          `rx: ${box.db} is an empty file (0 bytes), not an rx log; rx will not turn it into a new, empty log. If it was your log, it was truncated: restore it from a backup; otherwise remove it\n`
        )
      }
      expect(statSync(box.db).size).toBe(0)
      const doctor = yield* rx(["doctor", "--db", box.db])
      expect(doctor.code).toBe(10)
      expect(doctor.stdout).toContain("empty file (0 bytes)")
      const missing = yield* rx(["doctor", "--db", `${box.db}.nope`])
      expect(missing.code).toBe(1)
      expect(missing.stderr).toBe(`rx: no rx database at ${box.db}.nope (pass --db or set RX_DB)\n`)
    }))

  it.scopedLive("another program's SQLite file is refused and left as it was", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const db = new Database(box.db)
      db.exec("CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine')")
      db.close()
      const before = readFileSync(box.db)
      for (const args of [["run", "x", "--model", "m"], ["resume", "g1"], ["list"]]) {
        const ran = yield* rx([...args, "--db", box.db])
        expect(ran.code, args[0]).toBe(1)
        expect(ran.stderr, args[0]).toContain("is a SQLite database but not an rx log (it has tables notes and no rx_migrations)")
      }
      expect(readFileSync(box.db).equals(before)).toBe(true)
    }))

  it.scopedLive("a folder made for a --db or RX_DB log is said, with the log; a log in an existing folder is made silently", () =>
    Effect.gen(function*() {
      const state = temp("rx-xdg-")
      for (const [flag, env] of [[true, {}], [false, {}]] as const) {
        const root = temp("rx-typo-")
        const typo = join(root, "logz", "rx.db")
        const { ran } = yield* runGoal({ XDG_STATE_HOME: state, ...env, ...(flag ? {} : { RX_DB: typo }) }, flag ? ["--db", typo] : [])
        expect(ran.code, ran.stderr).toBe(0)
        expect(ran.stderr).toBe(
          `rx: note: made the folder ${join(root, "logz")} for a new log, ${typo} (named by ${flag ? "--db" : "RX_DB"}); if that path is a typo, remove the folder and give the right one\n`
        )
        expect(existsSync(typo)).toBe(true)
      }
      const box = sandbox()
      expect((yield* runGoal({ XDG_STATE_HOME: state }, ["--db", join(box.root, "in-place.db")])).ran.stderr).toBe("")
    }))

  it.scopedLive("resume and cancel never create a database", () =>
    Effect.gen(function*() {
      const box = sandbox()
      for (const command of ["resume", "cancel"]) {
        const ran = yield* rx([command, "g1", "--db", box.db])
        expect(ran.code).toBe(1)
        expect(ran.stderr).toContain(`no rx database at ${box.db} (rx run creates one`)
      }
      expect(existsSync(box.db)).toBe(false)
    }))
})

/** A copy of `file` with `change` applied to its bytes. */
const damagedCopy = (file: string, change: (bytes: Buffer) => void) => {
  const copy = join(temp("rx-damaged-"), "rx.db")
  copyFileSync(file, copy)
  const bytes = readFileSync(copy)
  change(bytes)
  writeFileSync(copy, bytes)
  return copy
}

describe("rx doctor", () => {
  it.scopedLive("a healthy database: exit 0, and --json prints the report", () =>
    Effect.gen(function*() {
      const file = join(temp("rx-doc-"), "rx.db")
      const { ran } = yield* runGoal({}, ["--db", file])
      expect(ran.code).toBe(0)
      const doctor = yield* rx(["doctor", "--db", file])
      expect(doctor.code).toBe(0)
      expect(doctor.stdout).toBe(`rx doctor: ${file}\n  1 goal, 8 events checked\nhealthy\n`)
      const json = yield* rx(["doctor", "--json", "--db", file])
      expect(json.code).toBe(0)
      expect(JSON.parse(json.stdout)).toEqual({ filename: file, healthy: true, opened: true, goals: 1, events: 8, findings: [] })
    }))

  it.scopedLive("flipped bytes: a broken page is refused at open and reported; a broken event is named by goal and seq", () =>
    Effect.gen(function*() {
      const file = join(temp("rx-doc-"), "rx.db")
      const { goalId } = yield* runGoal({}, ["--db", file])
      const db = new Database(file, { readonly: true })
      const root = Number(db.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'events'").pluck().get())
      const pageSize = Number(db.pragma("page_size", { simple: true }))
      const outcome = db.prepare("SELECT seq FROM events WHERE goal_id = ? AND tag = 'ToolSucceeded'").pluck().get(goalId)
      db.close()

      // The events table's root page is no longer a b-tree page.
      const broken = damagedCopy(file, (bytes) => {
        bytes[(root - 1) * pageSize] = 0
      })
      const resumed = yield* rx(["resume", goalId, "--db", broken])
      expect(resumed.code).toBe(1)
      expect(resumed.stderr).toMatch(/^rx: .* is damaged: SQLite's quick_check found .*; rx will not write to a damaged log: restore it from a backup \(rx doctor --db .* reports everything it finds\)\n$/)
      const doctor = yield* rx(["doctor", "--db", broken])
      expect(doctor.code).toBe(10)
      expect(doctor.stdout).toMatch(/\n  problem  integrity /)
      expect(doctor.stdout).toMatch(/\nNOT healthy: \d+ problems? .*\(exit 10\)/)

      // One event's JSON is no longer JSON: SQLite sees nothing wrong; its checksum does, and doctor names it.
      const marker = Buffer.from(`{"iteration":1,"at":`)
      const event = damagedCopy(file, (bytes) => {
        // The ToolSucceeded row's payload is the first one of iteration 1 that has an output.
        for (let at = bytes.indexOf(marker); at >= 0; at = bytes.indexOf(marker, at + 1)) {
          if (bytes.subarray(at, at + 200).includes("\"output\"")) bytes[at] = "<".charCodeAt(0)
        }
      })
      const report = yield* rx(["doctor", "--json", "--db", event])
      expect(report.code).toBe(10)
      expect(JSON.parse(report.stdout)).toMatchObject({
        healthy: false,
        findings: [{ check: "checksum", severity: "problem", goalId, seq: outcome }]
      })
      const inspected = yield* rx(["inspect", goalId, "--db", event])
      expect(inspected.code).toBe(1)
      expect(inspected.stderr).toContain(`goal ${goalId}, seq ${outcome}: its payload does not match the checksum rx stored with it`)
    }))
})
