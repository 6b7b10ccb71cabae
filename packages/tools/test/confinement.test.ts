import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Confinement } from "../src/index.js"

const segment = fc.constantFrom("a", "b", "ab", "..", ".", "..b", "a..", "")

describe("Confinement", () => {
  it.prop(
    "inside agrees with walking the normalized path from the root",
    [fc.array(segment, { minLength: 1, maxLength: 4 }), fc.array(segment, { maxLength: 6 })],
    ([rootParts, rest]) => {
      const root = path.resolve("/", ...rootParts)
      const candidate = path.resolve(root, ...rest)
      const expected = candidate === root || candidate.startsWith(root === "/" ? "/" : `${root}/`)
      expect(Confinement.inside(root, candidate)).toBe(expected)
      expect(Confinement.below(root, candidate)).toBe(expected && candidate !== root)
      const segments = Confinement.segments(root, candidate)
      expect(segments === undefined ? undefined : path.join(root, ...segments)).toBe(expected ? candidate : undefined)
    }
  )

  it("names the lookalikes: a sibling with the root's name as prefix is outside, a `..b` folder is inside", () => {
    expect(Confinement.inside("/w/root", "/w/rootx")).toBe(false)
    expect(Confinement.inside("/w/root", "/w")).toBe(false)
    expect(Confinement.inside("/w/root", "/w/root/..b")).toBe(true)
    expect(Confinement.segments("/w/root", "/w/root/a/b")).toEqual(["a", "b"])
    expect(Confinement.segments("/", "/a")).toEqual(["a"])
    expect(Confinement.below("/w/root", "/w/root")).toBe(false)
  })

  it.effect("folderInside resolves links: a link leaving the root, a file and a missing path are refused", () =>
    Effect.gen(function*() {
      const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "rx-confinement-")))
      const root = path.join(base, "root")
      fs.mkdirSync(path.join(root, "sub"), { recursive: true })
      fs.mkdirSync(path.join(base, "outside"))
      fs.writeFileSync(path.join(root, "file"), "x")
      fs.symlinkSync(path.join(base, "outside"), path.join(root, "away"))
      fs.symlinkSync(path.join(root, "sub"), path.join(base, "toward"))
      expect(yield* Confinement.folderInside(root, path.join(root, "sub"))).toEqual(Option.some(path.join(root, "sub")))
      expect(yield* Confinement.folderInside(root, path.join(base, "toward"))).toEqual(Option.some(path.join(root, "sub")))
      expect(yield* Confinement.folderInside(root, path.join(root, "away"))).toEqual(Option.none())
      expect(yield* Confinement.folderInside(root, path.join(root, "file"))).toEqual(Option.none())
      expect(yield* Confinement.folderInside(root, path.join(root, "missing"))).toEqual(Option.none())
      // The synchronous check gives the same answers.
      for (const candidate of ["sub", "away", "file", "missing", "sub/../away", "away/../sub"].map((p) => path.join(root, p)).concat(path.join(base, "toward"), base)) {
        expect([candidate, Confinement.folderInsideNow(root, candidate)]).toEqual([candidate, yield* Confinement.folderInside(root, candidate)])
        expect([candidate, Confinement.realFolderNow(candidate)]).toEqual([candidate, yield* Confinement.realFolder(candidate)])
      }
      fs.rmSync(base, { recursive: true, force: true })
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
