/**
 * The server's token file: written whole or not at all, and what a writer killed mid-write left
 * beside it (a temporary file holding a token) removed by the next write once that writer is gone.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { TokenFile } from "@rx/server"

describe("TokenFile", () => {
  it.effect("a write removes the temporary files of writers that are gone, keeps those of live ones, and leaves none of its own", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "rx-token-"))
      const file = join(dir, "rx-server.token")
      // A process that has exited: its pid names no process now.
      const gone = spawnSync(process.execPath, ["-e", "0"]).pid
      expect(gone).toBeGreaterThan(0)
      const leftover = `.rx-server.token.${gone}.0a1b2c3d4e5f.tmp`
      // Pid 1 always runs: its file may be a write in progress.
      const live = ".rx-server.token.1.0a1b2c3d4e5f.tmp"
      const other = ".other.token.99999999.0a1b2c3d4e5f.tmp"
      for (const name of [leftover, live, other]) writeFileSync(join(dir, name), `${TokenFile.generate()}\n`, { mode: 0o600 })
      const token = TokenFile.generate()
      yield* TokenFile.write(file, token)
      expect(readdirSync(dir).sort()).toEqual([live, other, "rx-server.token"].sort())
      expect(statSync(file).mode & 0o777).toBe(0o600)
      expect(yield* TokenFile.read(file)).toEqual(Option.some(token))
    }))
})
