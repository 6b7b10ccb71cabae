/**
 * Every event of every golden log (`packages/kernel/test/logs/<version>/`: the `.jsonl` files and
 * the rows of the SQLite databases) decodes and re-encodes byte for byte: what a log holds is
 * exactly what today's encoding of the decoded event writes. A change in how Effect decodes or
 * encodes an event (a new major version of it) that altered one byte of a stored log fails here.
 *
 * A log of an older encoding version is first upcast to today's: for it, the re-encoding of
 * today's form is checked to be stable (decode, encode, decode, encode gives the same bytes), and
 * its bytes are compared with the original where the upcast left the event as it was written.
 */
import { describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Event } from "@rx/kernel"
import { decodeRow, slimJson } from "../src/internal/codec.js"

const root = path.join(import.meta.dirname, "..", "..", "kernel", "test", "logs")
const versions = fs.readdirSync(root).filter((name) => fs.statSync(path.join(root, name)).isDirectory()).sort()
const eventVersionOf = (version: string): number => {
  const parsed: unknown = JSON.parse(fs.readFileSync(path.join(root, version, "manifest.json"), "utf8"))
  const value = typeof parsed === "object" && parsed !== null && "eventVersion" in parsed ? parsed.eventVersion : undefined
  if (typeof value !== "number") throw new Error(`test/logs/${version}/manifest.json has no eventVersion`)
  return value
}

const decoded = <A>(either: Either.Either<A, string>, where: string): A => {
  if (Either.isLeft(either)) throw new Error(`${where} does not decode: ${either.left}`)
  return either.right
}

/** Today's JSON of `event`, checked stable: decoding it at today's version gives it again. */
const stable = (event: Event.Event, where: string) => {
  const json = Event.encodeJson(event)
  expect(Event.encodeJson(decoded(Event.decodeJson(json), where)), where).toBe(json)
  return json
}

describe("golden logs decode and re-encode byte for byte", () => {
  it("there are logs of today's encoding version (which must match byte for byte)", () => {
    expect(versions.some((version) => eventVersionOf(version) === Event.version)).toBe(true)
  })

  for (const version of versions) {
    const eventVersion = eventVersionOf(version)
    const folder = path.join(root, version)
    const files = fs.readdirSync(folder).filter((name) => name.endsWith(".jsonl") || name.endsWith(".db")).sort()

    it(`${version}: every line of every .jsonl file`, () => {
      let lines = 0
      for (const file of files.filter((name) => name.endsWith(".jsonl"))) {
        for (const [index, line] of fs.readFileSync(path.join(folder, file), "utf8").split("\n").filter((l) => l.trim() !== "").entries()) {
          const where = `${version}/${file}:${index + 1}`
          const event = decoded(Event.decodeJson(line, eventVersion), where)
          const json = stable(event, where)
          if (eventVersion === Event.version) expect(json, where).toBe(line)
          lines++
        }
      }
      expect(lines).toBeGreaterThan(0)
    })

    for (const file of files.filter((name) => name.endsWith(".db"))) {
      it(`${version}/${file}: every row of events`, () => {
        const db = new Sqlite(path.join(folder, file), { readonly: true, fileMustExist: true })
        try {
          const columns = new Set(db.prepare("SELECT name FROM pragma_table_info(?)").all("events").map((row) => (row as { name: string }).name))
          const rows = db.prepare(
            `SELECT goal_id, seq, tag, version, ${columns.has("format") ? "format" : "2"}, payload, ${columns.has("checksum") ? "checksum" : "NULL"} FROM events ORDER BY goal_id, seq`
          ).raw().all() as Array<Array<unknown>>
          expect(rows.length).toBeGreaterThan(0)
          for (const [goalId, ...row] of rows) {
            const where = `${version}/${file}: goal ${String(goalId)}, seq ${String(row[0])}`
            const event = decoded(decodeRow(String(goalId), Number(row[0]), row), where)
            stable(event, where)
            // Rows are slim (format 2): the payload without the ids the columns hold.
            expect(row[3], where).toBe(2)
            if (row[2] === Event.version) expect(slimJson(event), where).toBe(row[4])
          }
        } finally {
          db.close()
        }
      })
    }
  }
})
