import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { HeadTail } from "../src/internal/capture.js"
import * as Glob from "../src/internal/glob.js"
import * as Text from "../src/internal/text.js"
import { invoke, makeDirs, ok, withTools } from "./helpers.js"

describe("HeadTail", () => {
  it.prop(
    "keeps exactly the first and last bytes and counts the rest",
    [fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 30 }), fc.nat(200), fc.nat(200)],
    ([chunks, headMax, tailMax]) => {
      const capture = new HeadTail(headMax, tailMax)
      for (const chunk of chunks) capture.push(Buffer.from(chunk))
      const all = Buffer.concat(chunks.map((c) => Buffer.from(c)))
      const { dropped, head, tail } = capture.result()
      const headLength = Math.min(headMax, all.length)
      const tailLength = Math.min(tailMax, all.length - headLength)
      expect(capture.total).toBe(all.length)
      expect(head).toEqual(all.subarray(0, headLength))
      expect(tail).toEqual(all.subarray(all.length - tailLength))
      expect(dropped).toBe(all.length - headLength - tailLength)
    }
  )
})

describe("read_file paging", () => {
  it.effect.prop(
    "following next_offset returns the whole file, each page within the caps",
    [fc.array(fc.string({ maxLength: 40 }).map((s) => s.replace(/[\n\r]/g, "")), { maxLength: 60 }), fc.boolean(), fc.integer({ min: 1, max: 7 })],
    ([lines, finalNewline, limit]) =>
      Effect.gen(function*() {
        const { cleanup, ws } = makeDirs()
        const text = lines.join("\n") + (finalNewline && lines.length > 0 ? "\n" : "")
        fs.writeFileSync(path.join(ws, "f.txt"), text)
        const maxBytes = 200
        const config = { workspace: ws, sandbox: "none" as const, readMaxBytes: maxBytes }
        let offset: number | null = 1
        let rebuilt = ""
        let pages = 0
        while (offset !== null && pages++ < 100) {
          const out = ok(yield* withTools(config, invoke("read_file", { path: "f.txt", offset, limit })))
          expect(Buffer.byteLength(String(out["content"]))).toBeLessThanOrEqual(maxBytes)
          expect(Number(out["end_line"]) - Number(out["start_line"]) + 1).toBeLessThanOrEqual(limit)
          rebuilt += String(out["content"])
          offset = out["next_offset"] as number | null
        }
        expect(rebuilt).toBe(text)
        cleanup()
      }),
    { fastCheck: { numRuns: 15 } }
  )
})

describe("glob", () => {
  const cases: ReadonlyArray<readonly [string, string, boolean]> = [
    ["*.ts", "a.ts", true],
    ["*.ts", "a.tsx", false],
    ["*.ts", "dir/a.ts", false],
    ["src/**/*.ts", "src/a.ts", true],
    ["src/**/*.ts", "src/x/y/a.ts", true],
    ["src/**/*.ts", "lib/a.ts", false],
    ["**", "any/thing", true],
    ["a?c", "abc", true],
    ["a?c", "a/c", false],
    ["[ab].md", "b.md", true],
    ["[!ab].md", "b.md", false],
    ["*.{js,ts}", "x.js", true],
    ["*.{js,ts}", "x.rs", false],
    ["a.b", "aXb", false],
    ["(x)+", "(x)+", true]
  ]
  it("matches like a shell glob", () => {
    for (const [pattern, subject, expected] of cases) {
      expect(Glob.compile(pattern)?.test(subject), `${pattern} ~ ${subject}`).toBe(expected)
    }
    expect(Glob.compile("[abc")).toBeUndefined()
    expect(Glob.compile("{a,b")).toBeUndefined()
  })
})

describe("placeholders", () => {
  it("finds lines that stand for omitted code, and nothing else", () => {
    const flagged = [
      "// ... rest of the code unchanged",
      "# rest of file",
      "/* ... existing code ... */",
      "// existing code here",
      "...",
      "…",
      "<!-- rest of the content -->",
      "    // ... remaining methods unchanged"
    ]
    for (const line of flagged) expect(Text.placeholderLines(`a\n${line}\nb\n`, "x.ts"), line).toHaveLength(1)
    const fine = [
      "f(...args)",
      "const x = [...y]",
      "// TODO: handle errors...",
      "The rest of the code is explained below.",
      "console.log('...')",
      "// see the previous implementation in v1"
    ]
    for (const line of fine) expect(Text.placeholderLines(`a\n${line}\nb\n`, "x.ts"), line).toEqual([])
    expect(Text.placeholderLines("def f():\n    ...\n", "stub.pyi")).toEqual([])
    expect(Text.placeholderLines("def f():\n    # ... rest of the code\n", "m.py")).toHaveLength(1)
    expect(Text.newPlaceholders("a\n...\n", "a\n...\nb\n", "x.md")).toEqual([])
    expect(Text.newPlaceholders("a\n", "a\n...\n", "x.md")).toEqual(["..."])
  })
})
