/** JSON helpers shared by the kernel: canonical text, hashing and deterministic truncation. */

/** JSON text with object keys sorted, so equal values give equal text whatever their key order. */
export const canonical = (value: unknown): string => JSON.stringify(sortKeys(value)) ?? "null"

const sortKeys = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) {
      out[key] = sortKeys((value as Record<string, unknown>)[key])
    }
    return out
  }
  return value
}

/** FNV-1a, 32 bits, as 8 hex digits: a short, stable fingerprint (not for security). */
export const fingerprint = (text: string): string => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash.toString(16).padStart(8, "0")
}

/**
 * Cut `text` to at most `max` characters, keeping its head and tail and saying how much was
 * dropped. The same input always gives the same output.
 */
export const truncate = (text: string, max: number): string => {
  if (text.length <= max) return text
  const marker = (dropped: number) => `\n[... ${dropped} characters omitted ...]\n`
  const room = Math.max(0, max - marker(text.length).length)
  const head = Math.ceil(room * 0.6)
  const tail = room - head
  return text.slice(0, head) + marker(text.length - room) + (tail > 0 ? text.slice(text.length - tail) : "")
}

/** Whether `value` nests arrays and objects deeper than `max` levels; iterative, so any depth is safe. */
export const deeperThan = (value: unknown, max: number): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const top = stack.pop()
    if (top === undefined) break
    const [current, depth] = top
    if (current === null || typeof current !== "object") continue
    if (depth >= max) return true
    for (const child of Array.isArray(current) ? current : Object.values(current)) stack.push([child, depth + 1])
  }
  return false
}

/** Nesting deeper than this is not recorded: encoding it would exhaust the stack. */
export const maxJsonDepth = 512

class Leave {
  constructor(readonly value: object) {}
}

/**
 * Whether `value` is plain JSON that survives encoding and decoding unchanged: null, booleans,
 * finite numbers, strings, arrays and plain objects, no cycles, no `undefined` in arrays, at
 * most `maxJsonDepth` deep. Iterative, so any value is safe to check.
 */
export const isJson = (value: unknown): boolean => {
  const path = new Set<object>()
  const stack: Array<unknown> = [value]
  while (stack.length > 0) {
    const current = stack.pop()
    if (current instanceof Leave) {
      path.delete(current.value)
      continue
    }
    if (current === null || typeof current === "string" || typeof current === "boolean") continue
    if (typeof current === "number") {
      if (!Number.isFinite(current)) return false
      continue
    }
    if (typeof current !== "object" || path.has(current) || path.size >= maxJsonDepth) return false
    const prototype: unknown = Object.getPrototypeOf(current)
    const array = Array.isArray(current)
    if (!array && prototype !== Object.prototype && prototype !== null) return false
    path.add(current)
    stack.push(new Leave(current))
    if (array) {
      for (const item of current) {
        if (item === undefined) return false
        stack.push(item)
      }
    } else {
      for (const item of Object.values(current)) if (item !== undefined) stack.push(item)
    }
  }
  return true
}
