/**
 * The bundled `rx` keeps V8's code cache of its chunks in the user's cache folder
 * (src/internal/load.ts), made after a command ran. The cache is only a speed-up: garbage, a
 * truncated file, a folder that cannot be written, or several rx processes filling it at once
 * must never break a command.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs"
import { createHash } from "node:crypto"
import { tmpdir } from "node:os"
import { basename, dirname, join } from "node:path"
import { Script } from "node:vm"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { prune } from "../src/internal/load.js"
import { bin, rx, sandbox } from "./helpers.js"

/** The code cache's files under `home` (`<home>/rx/code-<rx>-<node>-<arch>/`). */
const cacheFiles = (home: string) => {
  const rxDir = join(home, "rx")
  if (!existsSync(rxDir)) return []
  return readdirSync(rxDir).flatMap((folder) => readdirSync(join(rxDir, folder)).map((name) => join(rxDir, folder, name)))
}

/** `cache` as XDG_CACHE_HOME, without Node's own compile-cache variables. */
const cacheEnv = (cache: string) => ({ XDG_CACHE_HOME: cache, NODE_COMPILE_CACHE: undefined, NODE_DISABLE_COMPILE_CACHE: undefined })

/** `rx list` with the cache in `cache`. */
const list = (db: string, cache: string) => rx(["list", "--db", db], cacheEnv(cache))

/** A sandbox whose log holds one finished goal (run with a cache of its own). */
const withGoal = Effect.gen(function*() {
  const server = yield* FakeServer.make([FakeServer.completion({ toolCalls: [{ name: "done", arguments: JSON.stringify({ summary: "ok" }) }] })])
  const box = sandbox()
  const ran = yield* rx(["run", "a goal", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none"], {
    XDG_CACHE_HOME: join(box.root, "run-cache")
  })
  expect(ran.code).toBe(0)
  return box
})

describe("the code cache of the bundled rx", () => {
  it.scopedLive("is written by a first run, then read: the next run leaves it as it is", () =>
    Effect.gen(function*() {
      const { root, db } = yield* withGoal
      const cache = join(root, "cache")
      const first = yield* list(db, cache)
      expect(first.stderr).toBe("")
      expect(first.code).toBe(0)
      const files = cacheFiles(cache)
      expect(files.length).toBeGreaterThan(0)
      // Each entry is named by its chunk and a hash of the chunk's content: V8 checks only the
      // length of the source, so a cache of other code of the same length must never be found.
      for (const file of files) {
        const [, chunk = "", hash = ""] = /^(.+\.cjs)\.([\w-]+)\.v8$/.exec(basename(file)) ?? []
        const content = readFileSync(join(dirname(bin), "rx-chunks", chunk))
        expect(hash).toBe(createHash("sha256").update(content).digest("base64url").slice(0, 22))
      }
      // Made after the command ran: it holds the functions `rx list` called, not only each
      // chunk's top level (what Node's compile cache keeps), so it is larger than that would be.
      const main = files.find((file) => basename(file).startsWith("main-")) ?? ""
      const chunk = readFileSync(join(dirname(bin), "rx-chunks", basename(main).replace(/\.[\w-]+\.v8$/, "")), "utf8")
      const compiledOnly = new Script(`(function (exports, require, module, __filename, __dirname) { ${chunk}\n});`).createCachedData().length
      expect(statSync(main).size).toBeGreaterThan(compiledOnly * 1.5)
      const before = files.map((file) => statSync(file).mtimeMs)
      const second = yield* list(db, cache)
      expect(second).toEqual(first)
      // V8 took every file: none rewritten.
      expect(files.map((file) => statSync(file).mtimeMs)).toEqual(before)
    }))

  it.scopedLive("an entry a day old (or ahead of the clock) is remade after the command, once: a cache made by rx --help comes to hold what rx list runs", () =>
    Effect.gen(function*() {
      const { root, db } = yield* withGoal
      const cache = join(root, "cache")
      expect((yield* rx(["--help"], cacheEnv(cache))).code).toBe(0)
      const main = cacheFiles(cache).find((file) => basename(file).startsWith("main-")) ?? ""
      const helpSize = statSync(main).size
      // A fresh entry is taken as it is, whatever made it.
      const fresh = statSync(main).mtimeMs
      const expected = yield* list(db, cache)
      expect(expected.code).toBe(0)
      expect(statSync(main).mtimeMs).toBe(fresh)
      // Two days later, the next command remakes what it took: the entry grows by what rx list called.
      const old = new Date(Date.now() - 2 * 24 * 60 * 60 * 1000)
      for (const file of cacheFiles(cache)) utimesSync(file, old, old)
      expect(yield* list(db, cache)).toEqual(expected)
      expect(statSync(main).mtimeMs).toBeGreaterThan(old.getTime() + 24 * 60 * 60 * 1000)
      expect(statSync(main).size).toBeGreaterThan(helpSize * 1.2)
      expect(statSync(main).mode & 0o077).toBe(0)
      // Then it is left as it is again.
      const remade = cacheFiles(cache).map((file) => statSync(file).mtimeMs)
      expect(yield* list(db, cache)).toEqual(expected)
      expect(cacheFiles(cache).map((file) => statSync(file).mtimeMs)).toEqual(remade)
      // A time two days ahead (a clock set back) cannot keep an entry forever: it is remade too.
      const ahead = new Date(Date.now() + 2 * 24 * 60 * 60 * 1000)
      utimesSync(main, ahead, ahead)
      expect(yield* list(db, cache)).toEqual(expected)
      expect(statSync(main).mtimeMs).toBeLessThan(ahead.getTime() - 24 * 60 * 60 * 1000)
    }))

  it.scopedLive("RX_CODE_CACHE=0 leaves the cache unused: nothing is written", () =>
    Effect.gen(function*() {
      const { root, db } = yield* withGoal
      const cache = join(root, "cache")
      const ran = yield* rx(["list", "--db", db], { XDG_CACHE_HOME: cache, RX_CODE_CACHE: "0" })
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain("terminated(done)")
      expect(existsSync(cache)).toBe(false)
    }))

  it.scopedLive("garbage or a truncated cache is rejected: the command runs, and the cache is written anew", () =>
    Effect.gen(function*() {
      const { root, db } = yield* withGoal
      const cache = join(root, "cache")
      const expected = yield* list(db, cache)
      expect(expected.code).toBe(0)
      const files = cacheFiles(cache)
      expect(files.length).toBeGreaterThan(1)
      const garbage = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131 + 7) % 256))
      const damaged = files.map((file, i) => {
        const text = i % 2 === 0 ? garbage : readFileSync(file).subarray(0, Math.floor(statSync(file).size / 2))
        writeFileSync(file, text)
        return text
      })
      const ran = yield* list(db, cache)
      expect(ran).toEqual(expected)
      // Each damaged file was replaced by one V8 made (the next run takes them all).
      files.forEach((file, i) => expect(readFileSync(file).equals(damaged[i] ?? Buffer.alloc(0))).toBe(false))
      const mtimes = files.map((file) => statSync(file).mtimeMs)
      expect(yield* list(db, cache)).toEqual(expected)
      expect(files.map((file) => statSync(file).mtimeMs)).toEqual(mtimes)
    }))

  it.scopedLive("a cache file that another user owns, or that others can write, is not read: it is written anew", () =>
    Effect.gen(function*() {
      const { root, db } = yield* withGoal
      const cache = join(root, "cache")
      const expected = yield* list(db, cache)
      const files = cacheFiles(cache)
      expect(files.length).toBeGreaterThan(1)
      // As root (as in CI's container), also a file of another user.
      const root_ = typeof process.getuid === "function" && process.getuid() === 0
      files.forEach((file, i) => (root_ && i % 2 === 1 ? chownSync(file, 12345, 12345) : chmodSync(file, 0o666)))
      expect(yield* list(db, cache)).toEqual(expected)
      // Each was replaced by a file of this user, for this user only.
      for (const file of files) {
        const stat = statSync(file)
        expect(stat.mode & 0o077).toBe(0)
        if (typeof process.getuid === "function") expect(stat.uid).toBe(process.getuid())
      }
    }))

  it.scopedLive("a cache folder that cannot be written: the command runs all the same, and says nothing of it", () =>
    Effect.gen(function*() {
      const { root, db } = yield* withGoal
      // XDG_CACHE_HOME is a file: no folder can be made in it (even as root).
      const file = join(root, "not-a-folder")
      writeFileSync(file, "")
      const ran = yield* list(db, file)
      expect(ran.stderr).toBe("")
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain("terminated(done)")
      // A folder whose cache folder is a read-only one (root writes there anyway: then it is used).
      const readOnly = join(root, "read-only")
      mkdirSync(join(readOnly, "rx"), { recursive: true })
      chmodSync(join(readOnly, "rx"), 0o500)
      const again = yield* list(db, readOnly)
      expect(again).toEqual(ran)
    }))

  it.scopedLive("rx processes filling the cache at once all succeed, and leave a cache the next run takes", () =>
    Effect.gen(function*() {
      const { root, db } = yield* withGoal
      const cache = join(root, "cache")
      const runs = yield* Effect.all(Array.from({ length: 4 }, () => list(db, cache)), { concurrency: "unbounded" })
      for (const ran of runs) {
        expect(ran.stderr).toBe("")
        expect(ran.code).toBe(0)
      }
      const files = cacheFiles(cache)
      // Only renamed, finished files: no temporary one left.
      expect(files.length).toBeGreaterThan(0)
      expect(files.filter((file) => !file.endsWith(".v8"))).toEqual([])
      const mtimes = files.map((file) => statSync(file).mtimeMs)
      expect(yield* list(db, cache)).toEqual(runs[0])
      expect(files.map((file) => statSync(file).mtimeMs)).toEqual(mtimes)
    }))
})

describe("pruning the code cache", () => {
  it("drops the entries this rx does not have, old temporary files, other versions' folders not written to for 30 days, and Node's compile cache", () => {
    const root = mkdtempSync(join(tmpdir(), "rx-code-cache-"))
    const cache = join(root, "cache", "rx", "code-1.0.0-v20.0.0-x64")
    mkdirSync(cache, { recursive: true })
    const now = Date.now()
    const old = (path: string, days: number) => utimesSync(path, (now - days * 86_400_000) / 1000, (now - days * 86_400_000) / 1000)
    for (const name of ["main-A.cjs.h1.v8", "main-A.cjs.h0.v8", "gone-B.cjs.h2.v8", "main-A.cjs.h1.v8.1.x.tmp", "main-A.cjs.h1.v8.2.y.tmp"]) {
      writeFileSync(join(cache, name), "v8")
    }
    old(join(cache, "main-A.cjs.h1.v8.1.x.tmp"), 2)
    // The compile cache Node kept for an earlier rx, in the same folder.
    const nodes = join(root, "cache", "rx", "v24.22.3-x64-964aae3f-0")
    mkdirSync(nodes)
    writeFileSync(join(nodes, "00007f2b"), "v8")
    const stale = join(root, "cache", "rx", "code-0.9.0-v20.0.0-x64")
    const recent = join(root, "cache", "rx", "code-0.9.1-v20.0.0-x64")
    mkdirSync(stale)
    mkdirSync(recent)
    old(stale, 31)
    old(recent, 29)
    prune(cache, new Set(["main-A.cjs.h1.v8", "other-C.cjs.h3.v8"]), now)
    expect(readdirSync(cache).sort()).toEqual(["main-A.cjs.h1.v8", "main-A.cjs.h1.v8.2.y.tmp"])
    expect(readdirSync(join(root, "cache", "rx")).sort()).toEqual(["code-0.9.1-v20.0.0-x64", "code-1.0.0-v20.0.0-x64"])
  })
})
