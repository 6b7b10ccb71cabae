/**
 * What `rx` prints from a log is safe for a terminal and bounded: control characters from a
 * model, a tool or a file are shown escaped, never sent raw (human and `--json` output), and a
 * huge value prints as a capped excerpt.
 */
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { crc32 } from "node:zlib"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox } from "./helpers.js"

const call = (name: string, args: unknown, content?: string) =>
  FakeServer.completion({ ...(content === undefined ? {} : { content }), toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** Characters a terminal acts on (C0 but tab and newline, DEL, C1, bidi and line separators). */
const raw = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/

/** A title change (OSC), colours and a screen clear (CSI, also as 8-bit C1), a carriage return, a bidi override. */
const evil = "\u001b]0;pwned\u0007 \u001b[31mred\u001b[0m \u009b2J \r overwritten \u202egnp.exe"

const runGoal = (steps: ReadonlyArray<FakeServer.Step>, extra: ReadonlyArray<string> = [], setup?: (workspace: string) => void) =>
  Effect.gen(function*() {
    const server = yield* FakeServer.make(steps)
    const box = sandbox()
    setup?.(box.workspace)
    const ran = yield* rx(["run", "read evil.txt", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none", ...extra])
    return { box, ran }
  })

describe("terminal escapes", () => {
  it.scopedLive("in a thought, a tool output and a summary: escaped in rx run, rx inspect and rx list; --json stays JSON and decodes to the same text", () =>
    Effect.gen(function*() {
      const steps = [call("read_file", { path: "evil.txt" }, `thinking ${evil}`), done(`done ${evil}`)]
      const { box, ran } = yield* runGoal(steps, [], (ws) => writeFileSync(join(ws, "evil.txt"), `${evil}\n`))
      expect(ran.code).toBe(0)
      expect(ran.stdout).not.toMatch(raw)
      // The closing line is one line: whitespace (the carriage return too) is folded into spaces.
      expect(ran.stdout).toContain("done \\u001b]0;pwned\\u0007 \\u001b[31mred\\u001b[0m \\u009b2J overwritten \\u202egnp.exe")
      const goalId = /^goal (\S+):/.exec(ran.stdout)?.[1] ?? ""
      for (const args of [["inspect", goalId], ["inspect", goalId, "--step", "1"], ["list"]]) {
        const shown = yield* rx([...args, "--db", box.db])
        expect(shown.code, args.join(" ")).toBe(0)
        expect(shown.stdout, args.join(" ")).not.toMatch(raw)
      }
      const step = (yield* rx(["inspect", goalId, "--step", "1", "--db", box.db])).stdout
      expect(step).toContain("thought   thinking \\u001b]0;pwned\\u0007")
      expect(step).toContain("\\u009b2J \\r overwritten")
      // --json: every line is JSON with nothing raw, and decodes to the original text.
      for (const args of [["events", goalId], ["list", "--json"]]) {
        const out = (yield* rx([...args, "--db", box.db])).stdout
        expect(out, args[0]).not.toMatch(raw)
        expect(jsonLines(out).length, args[0]).toBeGreaterThan(0)
      }
      const events = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout)
      expect(events.at(-1)).toMatchObject({ _tag: "Terminated", detail: `done ${evil}` })
      const json = yield* runGoal(steps, ["--json"], (ws) => writeFileSync(join(ws, "evil.txt"), `${evil}\n`))
      expect(json.ran.stdout).not.toMatch(raw)
      expect(jsonLines(json.ran.stdout).at(-1)).toMatchObject({ _tag: "Terminated", detail: `done ${evil}` })
    }))

  it.scopedLive("in an error message on stderr", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const ran = yield* rx(["inspect", "g\u001b]0;pwned\u0007", "--db", join(box.root, "no\u009bdir", "rx.db")])
      expect(ran.code).toBe(1)
      expect(ran.stderr).not.toMatch(raw)
      expect(ran.stderr).toContain("no\\u009bdir")
    }))
})

describe("huge values", () => {
  it.scopedLive("a 900 kB call input and summary, and a 5 MB tool output: rx run and rx inspect print capped excerpts", () =>
    Effect.gen(function*() {
      const content = "x".repeat(900_000)
      const { box, ran } = yield* runGoal([call("write_file", { path: "big.txt", content }), done("y".repeat(900_000))])
      expect(ran.code).toBe(0)
      expect(ran.stdout.length).toBeLessThan(5_000)
      const goalId = /^goal (\S+):/.exec(ran.stdout)?.[1] ?? ""
      // A tool of a program sharing the log (the built-in tools cap their own output) returned 5 MB on one line.
      const db = new Database(box.db)
      const row = db.prepare("SELECT seq, payload FROM events WHERE goal_id = ? AND tag = 'ToolSucceeded'").get(goalId) as { seq: number; payload: string }
      const payload = JSON.parse(row.payload) as Record<string, unknown>
      const huge = JSON.stringify({ ...payload, output: { text: "z".repeat(5_000_000) } })
      // With its checksum (CRC-32 of the payload), as a program writing rows of its own would store it.
      db.prepare("UPDATE events SET payload = ?, checksum = ? WHERE goal_id = ? AND seq = ?").run(huge, crc32(huge) | 0, goalId, row.seq)
      db.close()
      const inspected = yield* rx(["inspect", goalId, "--db", box.db])
      expect(inspected.code).toBe(0)
      expect(inspected.stdout.length).toBeLessThan(10_000)
      const step = yield* rx(["inspect", goalId, "--step", "1", "--db", box.db])
      expect(step.code).toBe(0)
      expect(step.stdout.length).toBeLessThan(40_000)
      expect(step.stdout).toContain(`… (${5_000_000 + 11 - 16_000} more characters; rx events prints the whole event)`)
      // rx events prints the whole event.
      const full = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout).find((e) => e["seq"] === row.seq)
      expect(JSON.stringify(full?.["output"]).length).toBe(5_000_000 + 11)
    }))
})
