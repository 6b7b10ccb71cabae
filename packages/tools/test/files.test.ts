import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { failed, invoke, makeDirs, ok, sha256, withTools } from "./helpers.js"

const setup = () => {
  const dirs = makeDirs()
  return { ...dirs, config: { workspace: dirs.ws, sandbox: "none" as const } }
}

describe("read_file", () => {
  it.effect("returns a 1-based line range with metadata", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      const text = Array.from({ length: 10 }, (_, i) => `line ${i + 1}`).join("\n") + "\n"
      fs.writeFileSync(path.join(ws, "a.txt"), text)
      const out = ok(yield* withTools(config, invoke("read_file", { path: "a.txt", offset: 3, limit: 2 })))
      expect(out["content"]).toBe("line 3\nline 4\n")
      expect(out["start_line"]).toBe(3)
      expect(out["end_line"]).toBe(4)
      expect(out["total_lines"]).toBe(10)
      expect(out["total_bytes"]).toBe(Buffer.byteLength(text))
      expect(out["size"]).toBe(Buffer.byteLength(text))
      expect(out["truncated"]).toBe(true)
      expect(out["truncated_by"]).toBe("limit")
      expect(out["next_offset"]).toBe(5)
      expect(out["sha256"]).toBe(sha256(text))
      expect(out["resolved_path"]).toBe(path.join(ws, "a.txt"))
      expect(typeof out["mtime"]).toBe("string")
      expect(out["binary"]).toBe(false)
      const all = ok(yield* withTools(config, invoke("read_file", { path: "a.txt" })))
      expect(all["content"]).toBe(text)
      expect(all["truncated"]).toBe(false)
      expect(all["next_offset"]).toBe(null)
      cleanup()
    }))

  it.effect("applies the default line limit and cuts by bytes at a line end", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      const text = Array.from({ length: 50 }, (_, i) => `${i + 1}`.padStart(9, "0")).join("\n") + "\n"
      fs.writeFileSync(path.join(ws, "n.txt"), text)
      const limited = ok(yield* withTools({ ...config, readDefaultLines: 5 }, invoke("read_file", { path: "n.txt" })))
      expect(limited["end_line"]).toBe(5)
      expect(limited["truncated_by"]).toBe("limit")
      // 10 bytes a line: 35 bytes hold three whole lines.
      const cut = ok(yield* withTools({ ...config, readMaxBytes: 35 }, invoke("read_file", { path: "n.txt", offset: 2 })))
      expect(cut["content"]).toBe("000000002\n000000003\n000000004\n")
      expect(cut["end_line"]).toBe(4)
      expect(cut["truncated_by"]).toBe("bytes")
      expect(cut["next_offset"]).toBe(5)
      // The same call gives the same answer.
      const again = ok(yield* withTools({ ...config, readMaxBytes: 35 }, invoke("read_file", { path: "n.txt", offset: 2 })))
      expect(again).toEqual(cut)
      cleanup()
    }))

  it.effect("cuts a single over-long line at a character boundary", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      fs.writeFileSync(path.join(ws, "long.txt"), "é".repeat(100) + "\nnext\n")
      const out = ok(yield* withTools({ ...config, readMaxBytes: 11 }, invoke("read_file", { path: "long.txt" })))
      expect(out["content"]).toBe("é".repeat(5))
      expect(out["truncated"]).toBe(true)
      expect(out["truncated_by"]).toBe("bytes")
      expect(out["next_offset"]).toBe(2)
      cleanup()
    }))

  it.effect("reports binary files without dumping them", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3, 0xff])
      fs.writeFileSync(path.join(ws, "img.png"), bytes)
      const out = ok(yield* withTools(config, invoke("read_file", { path: "img.png" })))
      expect(out["binary"]).toBe(true)
      expect(out["content"]).toBe("")
      expect(out["sha256"]).toBe(sha256(bytes))
      expect(out["size"]).toBe(bytes.length)
      cleanup()
    }))

  it.effect("refuses an offset past the end and a missing file, recoverably", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      fs.writeFileSync(path.join(ws, "a.txt"), "one\ntwo\n")
      const past = failed(yield* withTools(config, invoke("read_file", { path: "a.txt", offset: 5 })))
      expect(past.kind).toBe("recoverable")
      expect(past.message).toContain("past the end")
      const missing = failed(yield* withTools(config, invoke("read_file", { path: "nope.txt" })))
      expect(missing.kind).toBe("recoverable")
      expect(missing.message).toContain("nope.txt")
      const dir = failed(yield* withTools(config, invoke("read_file", { path: "." })))
      expect(dir.message).toContain("directory")
      cleanup()
    }))
})

describe("write_file", () => {
  it.effect("creates without a hash, overwrites only with the current hash", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      const created = ok(yield* withTools(config, invoke("write_file", { path: "sub/dir/new.txt", content: "hello\n" })))
      expect(created["created"]).toBe(true)
      expect(created["previous_sha256"]).toBe(null)
      expect(fs.readFileSync(path.join(ws, "sub/dir/new.txt"), "utf8")).toBe("hello\n")

      const noHash = failed(yield* withTools(config, invoke("write_file", { path: "sub/dir/new.txt", content: "bye!!\n" })))
      expect(noHash.kind).toBe("recoverable")
      expect(noHash.details).toMatchObject({ _tag: "@rx/tools/StaleFile", expected: null, actual: sha256("hello\n") })

      const wrong = "0".repeat(64)
      const stale = failed(
        yield* withTools(config, invoke("write_file", { path: "sub/dir/new.txt", content: "bye!!\n", expected_sha256: wrong }))
      )
      expect(stale.details).toMatchObject({ _tag: "@rx/tools/StaleFile", expected: wrong, actual: sha256("hello\n") })
      expect(stale.message).toContain(wrong)
      expect(stale.message).toContain(sha256("hello\n"))
      expect(fs.readFileSync(path.join(ws, "sub/dir/new.txt"), "utf8")).toBe("hello\n")

      const written = ok(
        yield* withTools(
          config,
          invoke("write_file", { path: "sub/dir/new.txt", content: "bye!!\n", expected_sha256: sha256("hello\n") })
        )
      )
      expect(written["created"]).toBe(false)
      expect(written["sha256"]).toBe(sha256("bye!!\n"))
      expect(fs.readFileSync(path.join(ws, "sub/dir/new.txt"), "utf8")).toBe("bye!!\n")

      const ghost = failed(
        yield* withTools(config, invoke("write_file", { path: "ghost.txt", content: "x", expected_sha256: wrong }))
      )
      expect(ghost.details).toMatchObject({ _tag: "@rx/tools/StaleFile", actual: null })
      expect(fs.existsSync(path.join(ws, "ghost.txt"))).toBe(false)
      cleanup()
    }))

  it.effect("replaces atomically: a new inode, mode kept, no temp file left", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      const file = path.join(ws, "run.sh")
      fs.writeFileSync(file, "#!/bin/sh\necho one\n")
      fs.chmodSync(file, 0o750)
      const before = fs.statSync(file)
      // A reader holding the old file keeps seeing the old content: the file was replaced, not rewritten.
      const fd = fs.openSync(file, "r")
      ok(yield* withTools(config, invoke("write_file", {
        path: "run.sh",
        content: "#!/bin/sh\necho two\n",
        expected_sha256: sha256("#!/bin/sh\necho one\n")
      })))
      const after = fs.statSync(file)
      expect(after.ino).not.toBe(before.ino)
      expect(after.mode & 0o777).toBe(0o750)
      expect(fs.readFileSync(fd, "utf8")).toBe("#!/bin/sh\necho one\n")
      fs.closeSync(fd)
      expect(fs.readFileSync(file, "utf8")).toBe("#!/bin/sh\necho two\n")
      expect(fs.readdirSync(ws)).toEqual(["run.sh"])
      cleanup()
    }))

  it.effect("refuses placeholder content unless allowed", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      const original = "function a() {\n  return 1\n}\nfunction b() {\n  return 2\n}\n"
      fs.writeFileSync(path.join(ws, "m.js"), original)
      for (const placeholder of ["// ... rest of the code unchanged", "...", "# existing code here", "/* rest of file */"]) {
        const content = `function a() {\n  return 10\n}\n${placeholder}\nfunction b() {\n  return 2\n}\n`
        const refused = failed(
          yield* withTools(config, invoke("write_file", { path: "m.js", content, expected_sha256: sha256(original) }))
        )
        expect(refused.kind).toBe("recoverable")
        expect(refused.message).toContain("placeholder")
        expect(fs.readFileSync(path.join(ws, "m.js"), "utf8")).toBe(original)
      }
      const fresh = failed(yield* withTools(config, invoke("write_file", { path: "n.js", content: "a()\n// ...\n" })))
      expect(fresh.message).toContain("placeholder")
      const content = "function a() {\n  return 10\n}\n// ... rest of the code unchanged\n"
      ok(yield* withTools(config, invoke("write_file", {
        path: "m.js",
        content,
        expected_sha256: sha256(original),
        allow_placeholder: true
      })))
      expect(fs.readFileSync(path.join(ws, "m.js"), "utf8")).toBe(content)
      // Spread syntax and prose with an ellipsis are not placeholders.
      ok(yield* withTools(config, invoke("write_file", { path: "spread.js", content: "f(...args)\nconst x = [...y]\n" })))
      cleanup()
    }))

  it.effect("refuses an overwrite that removes more than half of a file unless allowed", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      const original = "x".repeat(1000)
      fs.writeFileSync(path.join(ws, "big.txt"), original)
      const refused = failed(
        yield* withTools(config, invoke("write_file", { path: "big.txt", content: "x".repeat(499), expected_sha256: sha256(original) }))
      )
      expect(refused.kind).toBe("recoverable")
      expect(refused.message).toContain("allow_shrink")
      expect(fs.readFileSync(path.join(ws, "big.txt"), "utf8")).toBe(original)
      ok(yield* withTools(config, invoke("write_file", { path: "big.txt", content: "x".repeat(500), expected_sha256: sha256(original) })))
      ok(yield* withTools(config, invoke("write_file", {
        path: "big.txt",
        content: "y",
        expected_sha256: sha256("x".repeat(500)),
        allow_shrink: true
      })))
      expect(fs.readFileSync(path.join(ws, "big.txt"), "utf8")).toBe("y")
      cleanup()
    }))
})

describe("edit_file", () => {
  it.effect("replaces text that occurs exactly once, or all with replace_all", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      const original = "let a = 1\nlet b = 1\nlet c = 2\n"
      fs.writeFileSync(path.join(ws, "e.ts"), original)
      const ambiguous = failed(yield* withTools(config, invoke("edit_file", {
        path: "e.ts",
        old_text: "= 1",
        new_text: "= 3",
        expected_sha256: sha256(original)
      })))
      expect(ambiguous.message).toContain("2 times")
      const absent = failed(yield* withTools(config, invoke("edit_file", {
        path: "e.ts",
        old_text: "let z",
        new_text: "let y",
        expected_sha256: sha256(original)
      })))
      expect(absent.message).toContain("does not occur")
      const stale = failed(yield* withTools(config, invoke("edit_file", {
        path: "e.ts",
        old_text: "let c = 2",
        new_text: "let c = $&3",
        expected_sha256: "f".repeat(64)
      })))
      expect(stale.details).toMatchObject({ _tag: "@rx/tools/StaleFile", actual: sha256(original) })
      const once = ok(yield* withTools(config, invoke("edit_file", {
        path: "e.ts",
        old_text: "let c = 2",
        new_text: "let c = $&3",
        expected_sha256: sha256(original)
      })))
      expect(once["replacements"]).toBe(1)
      const second = "let a = 1\nlet b = 1\nlet c = $&3\n"
      expect(fs.readFileSync(path.join(ws, "e.ts"), "utf8")).toBe(second)
      expect(once["sha256"]).toBe(sha256(second))
      const all = ok(yield* withTools(config, invoke("edit_file", {
        path: "e.ts",
        old_text: "= 1",
        new_text: "= 4",
        replace_all: true,
        expected_sha256: once["sha256"]
      })))
      expect(all["replacements"]).toBe(2)
      expect(fs.readFileSync(path.join(ws, "e.ts"), "utf8")).toBe("let a = 4\nlet b = 4\nlet c = $&3\n")
      const placeholder = failed(yield* withTools(config, invoke("edit_file", {
        path: "e.ts",
        old_text: "let b = 4\n",
        new_text: "// ... rest of the code unchanged\n",
        expected_sha256: all["sha256"]
      })))
      expect(placeholder.message).toContain("placeholder")
      const missing = failed(yield* withTools(config, invoke("edit_file", { path: "none.ts", old_text: "a", new_text: "b" })))
      expect(missing.message).toContain("does not exist")
      cleanup()
    }))
})

describe("list_dir, find_files, search_text", () => {
  const tree = (ws: string) => {
    fs.mkdirSync(path.join(ws, "src/deep"), { recursive: true })
    fs.mkdirSync(path.join(ws, "node_modules/pkg"), { recursive: true })
    fs.writeFileSync(path.join(ws, "src/a.ts"), "export const a = 1\n// TODO: b\n")
    fs.writeFileSync(path.join(ws, "src/deep/b.ts"), "export const b = 2\n")
    fs.writeFileSync(path.join(ws, "src/deep/c.js"), "const TODO = 3\n")
    fs.writeFileSync(path.join(ws, "node_modules/pkg/index.ts"), "TODO\n")
    fs.writeFileSync(path.join(ws, "bin.dat"), Buffer.from([0, 1, 2, 84, 79, 68, 79]))
    fs.writeFileSync(path.join(ws, "README.md"), "# TODO\n")
  }

  it.effect("lists sorted entries to a depth", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      tree(ws)
      const top = ok(yield* withTools(config, invoke("list_dir", {})))
      expect(top["entries"]).toEqual([
        { path: "README.md", type: "file", size: 7 },
        { path: "bin.dat", type: "file", size: 7 },
        { path: "node_modules", type: "directory" },
        { path: "src", type: "directory" }
      ])
      const deep = ok(yield* withTools(config, invoke("list_dir", { path: "src", depth: 3 })))
      expect((deep["entries"] as Array<{ path: string }>).map((e) => e.path)).toEqual([
        "src/a.ts",
        "src/deep",
        "src/deep/b.ts",
        "src/deep/c.js"
      ])
      const capped = ok(yield* withTools({ ...config, maxEntries: 2 }, invoke("list_dir", { depth: 5 })))
      expect((capped["entries"] as Array<unknown>).length).toBe(2)
      expect(capped["truncated"]).toBe(true)
      cleanup()
    }))

  it.effect("finds files by glob", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      tree(ws)
      const ts = ok(yield* withTools(config, invoke("find_files", { pattern: "*.ts" })))
      expect(ts["files"]).toEqual(["src/a.ts", "src/deep/b.ts"])
      const scoped = ok(yield* withTools(config, invoke("find_files", { pattern: "deep/*.{js,ts}", path: "src" })))
      expect(scoped["files"]).toEqual(["src/deep/b.ts", "src/deep/c.js"])
      const globstar = ok(yield* withTools(config, invoke("find_files", { pattern: "src/**/*.ts" })))
      expect(globstar["files"]).toEqual(["src/a.ts", "src/deep/b.ts"])
      const bad = failed(yield* withTools(config, invoke("find_files", { pattern: "[abc" })))
      expect(bad.kind).toBe("recoverable")
      cleanup()
    }))

  it.effect("searches text with a regular expression, bounded", () =>
    Effect.gen(function*() {
      const { config, cleanup, ws } = setup()
      tree(ws)
      const found = ok(yield* withTools(config, invoke("search_text", { pattern: "TODO" })))
      expect(found["matches"]).toEqual([
        { path: "README.md", line: 1, text: "# TODO" },
        { path: "src/a.ts", line: 2, text: "// TODO: b" },
        { path: "src/deep/c.js", line: 1, text: "const TODO = 3" }
      ])
      expect(found["files_skipped"]).toBe(1)
      const one = ok(yield* withTools(config, invoke("search_text", { pattern: "^export const \\w+ = \\d$", path: "src/deep/b.ts" })))
      expect(one["matches"]).toEqual([{ path: "src/deep/b.ts", line: 1, text: "export const b = 2" }])
      const capped = ok(yield* withTools({ ...config, maxMatches: 1 }, invoke("search_text", { pattern: "TODO" })))
      expect((capped["matches"] as Array<unknown>).length).toBe(1)
      expect(capped["truncated"]).toBe(true)
      const bad = failed(yield* withTools(config, invoke("search_text", { pattern: "(" })))
      expect(bad.message).toContain("regular expression")
      cleanup()
    }))
})
