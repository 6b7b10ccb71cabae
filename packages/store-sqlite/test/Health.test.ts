/**
 * What the store opens, and `Doctor`: a 0-byte, foreign or damaged file is refused (and left
 * as it was), a new log is created only where no file exists, and `Doctor.check` reports
 * SQLite damage, gaps, misplaced `Terminated`s, events whose checksum does not match or that do
 * not decode, behaviour versions this rx does not know, stale summaries and leases, on real files
 * with real bytes flipped.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, FastCheck as fc, Layer } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as zlib from "node:zlib"
import Sqlite from "better-sqlite3"
import { Behaviour, Checksum, Runner, StateStore } from "@rx/kernel"
import { Doctor, Migrations, SqliteStore } from "@rx/store-sqlite"
import { checksum } from "../src/internal/checksum.js"
import { echoRun } from "./fixtures.js"
import { exec, tempDb, tempDir } from "./helpers.js"

const loadAll = (goalId: string) => Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))

/** Open a store on `filename` (building the Layer), or the reason it was refused. */
const open = (filename: string, options: { readonly readonly?: boolean; readonly create?: boolean } = {}) =>
  Effect.flip(Effect.scoped(Layer.build(SqliteStore.layer({ filename, ...options }))))

/** A real log: goal `g` of `n` echo calls, done; the file closed (its WAL checkpointed). */
const realLog = (n: number) =>
  Effect.gen(function*() {
    const filename = yield* tempDb
    yield* Runner.run({ goal: "echo", goalId: "g" }).pipe(Effect.provide(Layer.merge(SqliteStore.layer({ filename }), echoRun(n))))
    expect(fs.existsSync(`${filename}-wal`)).toBe(false)
    return filename
  })

/** A copy of `filename` beside it, with `change` applied to its bytes. */
const damagedCopy = (filename: string, name: string, change: (bytes: Buffer) => void) => {
  const copy = path.join(path.dirname(filename), name)
  const bytes = fs.readFileSync(filename)
  change(bytes)
  fs.writeFileSync(copy, bytes)
  return copy
}

const pageSize = 4_096

/** The pid of a process that has exited. */
const deadPid = () => spawnSync(process.execPath, ["-e", ""]).pid ?? 0

/** The page numbers (1-based) of a table's b-tree root. */
const rootPage = (filename: string, table: string) =>
  Effect.map(
    exec(`SELECT rootpage FROM sqlite_master WHERE name = '${table}'`).pipe(Effect.provide(SqliteStore.layerClient({ filename, readonly: true }))),
    (rows) => Number((rows[0] as { rootpage: number }).rootpage)
  )

const problems = (report: Doctor.Report, check?: Doctor.Check) =>
  report.findings.filter((f) => f.severity === "problem" && (check === undefined || f.check === check))

describe("opening", () => {
  it.scoped("a 0-byte file is refused, read-only or not, and stays 0 bytes", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      fs.writeFileSync(filename, "")
      for (const options of [{}, { readonly: true }, { create: false }]) {
        const refused = yield* open(filename, options)
        expect(refused).toMatchObject({ _tag: "@rx/store-sqlite/DatabaseRefused", reason: "empty" })
        expect(refused.message).toContain("empty file (0 bytes)")
      }
      expect(fs.statSync(filename).size).toBe(0)
      const report = yield* Doctor.check(filename)
      expect(report).toMatchObject({ healthy: false, opened: false })
      expect(problems(report, "open")[0]?.message).toContain("0 bytes")
    }))

  it.scoped("a missing file is created only when allowed; a new log carries rx's application_id", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const missing = path.join(dir, "missing.db")
      expect(yield* open(missing, { create: false })).toMatchObject({ _tag: "@rx/store-sqlite/DatabaseRefused", reason: "missing" })
      expect(yield* open(missing, { readonly: true })).toMatchObject({ _tag: "@rx/store-sqlite/DatabaseRefused", reason: "missing" })
      expect(fs.existsSync(missing)).toBe(false)
      // Two stores creating the same file at once both open the one complete log.
      const filename = path.join(dir, "new.db")
      yield* Effect.all([0, 1].map(() => Effect.scoped(Layer.build(SqliteStore.layer({ filename })))), { concurrency: 2 })
      const id = yield* exec("PRAGMA application_id").pipe(Effect.provide(SqliteStore.layerClient({ filename, readonly: true })))
      expect(id).toEqual([{ application_id: Migrations.applicationId }])
      expect(fs.readdirSync(dir).filter((f) => f.includes("creating"))).toEqual([])
      expect((yield* Doctor.check(filename)).healthy).toBe(true)
    }))

  it.scoped("another program's SQLite file (its application_id, or no tables) is refused and untouched", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const other = path.join(dir, "other.db")
      yield* Effect.zipRight(exec("PRAGMA application_id = 1234"), exec("CREATE TABLE rx_migrations (migration_id INTEGER)")).pipe(
        Effect.provide(SqliteStore.layerClient({ filename: other }))
      )
      const before = fs.readFileSync(other)
      for (const options of [{}, { readonly: true }]) {
        const refused = yield* open(other, options)
        expect(refused).toMatchObject({ _tag: "@rx/store-sqlite/DatabaseRefused", reason: "foreign" })
        expect(refused.message).toContain("another program's SQLite database (application_id 0x4d2)")
      }
      expect(fs.readFileSync(other).equals(before)).toBe(true)
      const blank = path.join(dir, "blank.db")
      yield* exec("PRAGMA user_version = 7").pipe(Effect.provide(SqliteStore.layerClient({ filename: blank })))
      const noTables = yield* open(blank)
      expect(noTables).toMatchObject({ _tag: "@rx/store-sqlite/DatabaseRefused", reason: "foreign" })
      expect(noTables.message).toContain("no tables")
      expect(problems(yield* Doctor.check(other), "open")).toHaveLength(1)
    }))

  it.scoped("an rx log missing one of its tables is refused as damaged", () =>
    Effect.gen(function*() {
      const filename = yield* realLog(2)
      yield* exec("DROP TABLE snapshots").pipe(Effect.provide(SqliteStore.layerClient({ filename })))
      const refused = yield* open(filename)
      expect(refused).toMatchObject({ _tag: "@rx/store-sqlite/DatabaseRefused", reason: "damaged" })
      expect(refused.message).toContain("missing its table snapshots")
    }))
})

describe("flipped bytes", () => {
  it.scoped("a broken b-tree page: a writable open refuses it (quick_check), doctor reports integrity problems", () =>
    Effect.gen(function*() {
      const filename = yield* realLog(60)
      const root = yield* rootPage(filename, "events")
      // The page type byte of the events table's root: no longer a b-tree page.
      const copy = damagedCopy(filename, "broken.db", (bytes) => {
        bytes[(root - 1) * pageSize] = 0x00
      })
      const refused = yield* open(copy)
      expect(refused).toMatchObject({ _tag: "@rx/store-sqlite/DatabaseRefused", reason: "damaged" })
      expect(refused.message).toContain("quick_check found")
      const report = yield* Doctor.check(copy)
      expect(report.healthy).toBe(false)
      expect(problems(report, "integrity").length).toBeGreaterThan(0)
      // The original is fine.
      expect(yield* Doctor.check(filename)).toMatchObject({ healthy: true, findings: [], goals: 1 })
    }))

  it.scoped("a payload byte: SQLite sees nothing, the checksum does; doctor and load name the goal and seq", () =>
    Effect.gen(function*() {
      const filename = yield* realLog(60)
      // The JSON of iteration 6's ToolSucceeded (seq 23), made into something that is not JSON.
      // Every copy of it: balancing pages can leave stale copies of a row in unused space.
      const marker = Buffer.from("{\"iteration\":6,\"at\":0,\"callId\":\"g:6\",\"tool\":\"echo\",\"output\"")
      let copies = 0
      const copy = damagedCopy(filename, "payload.db", (bytes) => {
        for (let at = bytes.indexOf(marker); at >= 0; at = bytes.indexOf(marker, at + 1)) {
          bytes[at] = "<".charCodeAt(0)
          copies++
        }
      })
      expect(copies).toBeGreaterThan(0)
      expect(yield* open(copy).pipe(Effect.flip, Effect.either)).toSatisfy(Either.isRight)
      const report = yield* Doctor.check(copy)
      expect(report.healthy).toBe(false)
      expect(problems(report, "integrity")).toEqual([])
      expect(problems(report, "decode")).toEqual([])
      const bad = problems(report, "checksum")
      expect(bad).toMatchObject([{ goalId: "g", seq: 23 }])
      expect(bad[0]?.message).toMatch(/^goal g: seq 23: its payload does not match the checksum rx stored with it \(stored -?\d+, the payload gives -?\d+\)/)
      const failed = yield* Effect.flip(loadAll("g").pipe(Effect.provide(SqliteStore.layer({ filename: copy, readonly: true }))))
      expect(failed).toMatchObject({ _tag: "@rx/kernel/StoreError", goalId: "g", seq: 23 })
      // A row written before checksums (none stored) is decoded as before: the JSON error is the finding.
      yield* exec("UPDATE events SET checksum = NULL WHERE goal_id = 'g' AND seq = 23").pipe(Effect.provide(SqliteStore.layerClient({ filename: copy })))
      const unchecked = yield* Doctor.check(copy)
      expect(problems(unchecked, "checksum")).toEqual([])
      expect(problems(unchecked, "decode")[0]?.message).toMatch(/^goal g: seq 23: the stored event \(encoding version \d+\) does not decode: not JSON/)
    }))

  it.scoped("one bit flipped in a tool's schema in GoalSubmitted: still JSON that decodes, but the checksum names goal and seq 0, to doctor and to every read", () =>
    Effect.gen(function*() {
      const filename = yield* realLog(3)
      // The echo tool's `"required":["text"]`, with one bit of the `t` flipped: `["dext"]`.
      const marker = Buffer.from("\"required\":[\"text\"]")
      let copies = 0
      const copy = damagedCopy(filename, "schema.db", (bytes) => {
        for (let at = bytes.indexOf(marker); at >= 0; at = bytes.indexOf(marker, at + 1)) {
          const t = at + "\"required\":[\"".length
          bytes[t] = (bytes[t] ?? 0) ^ 0x10
          copies++
        }
      })
      expect(copies).toBeGreaterThan(0)
      const report = yield* Doctor.check(copy)
      expect(report.healthy).toBe(false)
      expect(report.findings.filter((f) => f.severity === "problem").map((f) => [f.check, f.goalId, f.seq])).toEqual([["checksum", "g", 0]])
      for (const readonly of [true, false]) {
        const failed = yield* Effect.flip(loadAll("g").pipe(Effect.provide(Layer.fresh(SqliteStore.layer({ filename: copy, readonly })))))
        expect(failed).toMatchObject({ _tag: "@rx/kernel/StoreError", goalId: "g", seq: 0 })
        expect(failed.message).toContain("goal g, seq 0: its payload does not match the checksum rx stored with it")
      }
      // Without its checksum (a row an older rx wrote), the changed schema would be read as if rx had recorded it.
      yield* exec("UPDATE events SET checksum = NULL WHERE goal_id = 'g' AND seq = 0").pipe(Effect.provide(SqliteStore.layerClient({ filename: copy })))
      const [first] = yield* loadAll("g").pipe(Effect.provide(SqliteStore.layer({ filename: copy, readonly: true })))
      expect(first?._tag === "GoalSubmitted" && JSON.stringify(first.tools[0]?.parameters)).toContain("\"required\":[\"dext\"]")
    }))

  it.prop("the checksum is zlib's CRC-32 of the payload's UTF-8 bytes, as a signed 32-bit integer; the fallback for Node before 20.15 gives the same", [
    // Any code points, and any UTF-16 code units (lone surrogates too).
    fc.oneof(fc.string({ unit: "binary" }), fc.array(fc.integer({ min: 0, max: 0xffff })).map((units) => String.fromCharCode(...units)))
  ], ([text]) => {
    expect(checksum(text)).toBe(zlib.crc32(text) | 0)
    expect(Checksum.crc32(text)).toBe(checksum(text))
  })

  it.scoped("30 random bit flips in data pages: doctor always answers with a report, never fails", () =>
    Effect.gen(function*() {
      const filename = yield* realLog(60)
      const size = fs.statSync(filename).size
      let seed = 12345
      const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31
      let flagged = 0
      for (let i = 0; i < 30; i++) {
        const copy = damagedCopy(filename, `flip-${i}.db`, (bytes) => {
          // Past page 1 (the schema), anywhere in the data pages.
          const at = pageSize + Math.floor(random() * (size - pageSize))
          bytes[at] = (bytes[at] ?? 0) ^ (1 << Math.floor(random() * 8))
        })
        const report = yield* Doctor.check(copy)
        expect(report.filename).toBe(copy)
        if (!report.healthy) flagged++
        fs.rmSync(copy)
      }
      // Most flips land in JSON text or b-tree structure; a flip inside a string stays valid.
      expect(flagged).toBeGreaterThan(5)
    }))
})

describe("doctor", () => {
  it.scoped("a healthy database: no findings", () =>
    Effect.gen(function*() {
      const filename = yield* realLog(3)
      expect(yield* Doctor.check(filename)).toEqual({ filename, healthy: true, opened: true, goals: 1, events: 16, findings: [] })
    }))

  it.scoped("a goal of a behaviour version this rx does not know (a newer rx wrote it) is a problem, named by goal and seq", () =>
    Effect.gen(function*() {
      const filename = yield* realLog(3)
      // As a newer rx would write it: behaviour 99, with its checksum (zlib's CRC-32 of the payload).
      const db = new Sqlite(filename)
      const payload = String(db.prepare("SELECT payload FROM events WHERE goal_id = 'g' AND seq = 0").pluck().get())
      const newer = JSON.stringify({ ...(JSON.parse(payload) as object), behaviour: Behaviour.current + 97 })
      db.prepare("UPDATE events SET payload = ?, checksum = ? WHERE goal_id = 'g' AND seq = 0").run(newer, zlib.crc32(newer) | 0)
      db.close()
      const report = yield* Doctor.check(filename)
      expect(report.healthy).toBe(false)
      expect(report.findings.map((f) => [f.check, f.severity, f.goalId, f.seq])).toEqual([["behaviour", "problem", "g", 0]])
      expect(report.findings[0]?.message).toBe(
        `goal g: seq 0: GoalSubmitted says behaviour version ${Behaviour.current + 97}, which this rx does not know (it runs 1 to ${Behaviour.current}): a newer rx wrote the goal, and this one can neither resume nor replay it; upgrade rx`
      )
    }))

  it.scopedLive("a gap, a second Terminated, a stale summary and stale leases", () =>
    Effect.gen(function*() {
      const filename = yield* realLog(3)
      yield* Effect.gen(function*() {
        yield* exec("DELETE FROM events WHERE goal_id = 'g' AND seq IN (5, 6)")
        yield* exec("INSERT INTO events (goal_id, seq, tag, version, payload) SELECT goal_id, seq + 1, tag, version, payload FROM events WHERE goal_id = 'g' AND tag = 'Terminated'")
        // One from another host, with an old heartbeat; one from this host whose process is gone.
        yield* exec("INSERT INTO leases (goal_id, host, pid, token, acquired_at, heartbeat_at) VALUES ('g', 'elsewhere', 1, 't', 0, 0)")
        yield* exec(`INSERT INTO leases (goal_id, host, pid, token, acquired_at, heartbeat_at) VALUES ('h', '${os.hostname()}', ${deadPid()}, 't', 0, 0)`)
      }).pipe(Effect.provide(SqliteStore.layerClient({ filename })))
      const report = yield* Doctor.check(filename)
      expect(report.healthy).toBe(false)
      expect(problems(report, "seq").map((f) => f.message)).toEqual(["goal g: no events at seqs 5 to 6 (the log jumps to 7)"])
      expect(problems(report, "decode")).toEqual([])
      expect(problems(report, "terminated").map((f) => f.message)).toEqual(["goal g: 2 Terminated events (seqs 15, 16); a log ends with exactly one"])
      expect(problems(report, "summary")).toHaveLength(1)
      const stale = report.findings.filter((f) => f.check === "lease")
      expect(stale).toMatchObject([{ severity: "warning", goalId: "g" }, { severity: "warning", goalId: "h" }])
      expect(stale[0]?.message).toContain("stale lease, its holder is gone (pid 1 on host elsewhere")
    }))
})
