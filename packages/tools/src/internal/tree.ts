/**
 * The state of a folder tree as one fingerprint, to tell whether a sandboxed command changed the
 * workspace (the only place outside its private /tmp it can write): every entry's path, type,
 * inode, mode, size, modification and change times (nanoseconds), read without following links.
 */
import { createHash } from "node:crypto"
import { type BigIntStats, lstatSync, readdirSync } from "node:fs"
import { join } from "node:path"

/** Entries read at most; a larger tree's state is unknown (comparing it would cost too much per call). */
export const maxEntries = 10_000

/** Folders whose contents are not read: `.git` is read-only in the sandbox (its own entry still counts). */
const notEntered: ReadonlySet<string> = new Set([".git"])

const describe = (path: string, info: BigIntStats) =>
  `${path}\u0000${info.mode}\u0000${info.ino}\u0000${info.size}\u0000${info.mtimeNs}\u0000${info.ctimeNs}\n`

/**
 * The fingerprint of the tree at `root`; `undefined` when it cannot be told (more than `max`
 * entries, or an entry that cannot be read), which callers take as "may have changed".
 */
export const fingerprint = (root: string, max = maxEntries): string | undefined => {
  const hash = createHash("sha256")
  let entries = 0
  const stack: Array<string> = [""]
  try {
    hash.update(describe("", lstatSync(root, { bigint: true })))
    while (stack.length > 0) {
      const dir = stack.pop() ?? ""
      const names = readdirSync(join(root, dir)).sort()
      for (const name of names) {
        if (++entries > max) return undefined
        const path = dir === "" ? name : `${dir}/${name}`
        const info = lstatSync(join(root, path), { bigint: true })
        hash.update(describe(path, info))
        if (info.isDirectory() && !notEntered.has(path)) stack.push(path)
      }
    }
  } catch {
    return undefined
  }
  return hash.digest("hex")
}
