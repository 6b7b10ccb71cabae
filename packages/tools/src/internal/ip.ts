/**
 * IP address classification for `http_fetch`: parse IPv4 and IPv6 text to numbers, match CIDR
 * ranges, and name the ranges a fetch may not reach by default.
 */
import { isIPv4, isIPv6 } from "node:net"

/** A parsed address: 32-bit for IPv4, 128-bit for IPv6. */
export interface Address {
  readonly version: 4 | 6
  readonly value: bigint
}

const parseV4 = (text: string): bigint | undefined => {
  if (!isIPv4(text)) return undefined
  return text.split(".").reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n)
}

const parseV6 = (text: string): bigint | undefined => {
  const bare = text.replace(/^\[|\]$/g, "").replace(/%.*$/, "")
  if (!isIPv6(bare)) return undefined
  let head = bare
  let tailV4: bigint | undefined
  const lastColon = bare.lastIndexOf(":")
  const maybeV4 = bare.slice(lastColon + 1)
  if (maybeV4.includes(".")) {
    tailV4 = parseV4(maybeV4)
    if (tailV4 === undefined) return undefined
    head = bare.slice(0, lastColon + 1) + "0:0"
  }
  const [left = "", right] = head.split("::")
  const leftGroups = left === "" ? [] : left.split(":")
  const rightGroups = right === undefined || right === "" ? [] : right.split(":")
  const missing = 8 - leftGroups.length - rightGroups.length
  const groups = right === undefined ? leftGroups : [...leftGroups, ...Array<string>(missing).fill("0"), ...rightGroups]
  if (groups.length !== 8) return undefined
  let value = groups.reduce((acc, group) => (acc << 16n) | BigInt(parseInt(group, 16)), 0n)
  if (tailV4 !== undefined) value = (value & ~0xffffffffn) | tailV4
  return value
}

/** Parse an IPv4 or IPv6 address (brackets and zone allowed); `undefined` if it is neither. */
export const parse = (text: string): Address | undefined => {
  const v4 = parseV4(text)
  if (v4 !== undefined) return { version: 4, value: v4 }
  const v6 = parseV6(text)
  return v6 === undefined ? undefined : { version: 6, value: v6 }
}

/** A CIDR range. */
export interface Range {
  readonly version: 4 | 6
  readonly base: bigint
  readonly prefix: number
  readonly label: string
}

/** Parse `a.b.c.d/n`, `x::/n` or a single address; `undefined` if malformed. */
export const parseRange = (text: string, label = text): Range | undefined => {
  const [addr = "", prefixText] = text.split("/")
  const parsed = parse(addr)
  if (parsed === undefined) return undefined
  const bits = parsed.version === 4 ? 32 : 128
  const prefix = prefixText === undefined ? bits : Number(prefixText)
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > bits) return undefined
  return { version: parsed.version, base: parsed.value, prefix, label }
}

const mask = (bits: number, prefix: number): bigint =>
  prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(bits - prefix)

/** Whether an address lies in a range. */
export const inRange = (address: Address, range: Range): boolean => {
  if (address.version !== range.version) return false
  const m = mask(address.version === 4 ? 32 : 128, range.prefix)
  return (address.value & m) === (range.base & m)
}

const ranges = (entries: ReadonlyArray<readonly [string, string]>): ReadonlyArray<Range> =>
  entries.flatMap(([cidr, label]) => {
    const range = parseRange(cidr, label)
    return range === undefined ? [] : [range]
  })

/** IPv4 ranges that are not the public internet. */
const specialV4 = ranges([
  ["0.0.0.0/8", "unspecified"],
  ["10.0.0.0/8", "private"],
  ["100.64.0.0/10", "shared (carrier-grade NAT)"],
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link-local"],
  ["172.16.0.0/12", "private"],
  ["192.0.0.0/24", "IETF protocol assignments"],
  ["192.168.0.0/16", "private"],
  ["198.18.0.0/15", "benchmarking"],
  ["224.0.0.0/4", "multicast"],
  ["240.0.0.0/4", "reserved"]
])

/** IPv6 ranges that are not the public internet. */
const specialV6 = ranges([
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["fe80::/10", "link-local"],
  ["fec0::/10", "site-local"],
  ["fc00::/7", "private (unique local)"],
  ["ff00::/8", "multicast"]
])

/** IPv6 forms that embed an IPv4 address: mapped, compatible, NAT64, 6to4. */
const embedded = (address: Address): Address | undefined => {
  if (address.version !== 6) return undefined
  const v = address.value
  if (v >> 32n === 0xffffn) return { version: 4, value: v & 0xffffffffn } // ::ffff:a.b.c.d
  if (v >> 32n === 0n && v > 1n) return { version: 4, value: v & 0xffffffffn } // ::a.b.c.d
  if (v >> 32n === 0x0064ff9b0000000000000000n) return { version: 4, value: v & 0xffffffffn } // 64:ff9b::/96
  if (v >> 112n === 0x2002n) return { version: 4, value: (v >> 80n) & 0xffffffffn } // 2002:a.b.c.d::/48
  return undefined
}

/** Why an address may not be fetched by default (loopback, private, ...); `undefined` if public. */
export const classify = (address: Address): string | undefined => {
  const inner = embedded(address)
  if (inner !== undefined) {
    const label = classify(inner)
    return label === undefined ? undefined : `${label} (IPv4 inside IPv6)`
  }
  const table = address.version === 4 ? specialV4 : specialV6
  if (address.version === 4 && address.value === 0xffffffffn) return "broadcast"
  return table.find((range) => inRange(address, range))?.label
}

/** The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`) or -compatible (`::a.b.c.d`) one, which a connection reaches; else the address. */
export const unmapped = (address: Address): Address => {
  if (address.version !== 6) return address
  const high = address.value >> 32n
  return high === 0xffffn || (high === 0n && address.value > 1n) ? { version: 4, value: address.value & 0xffffffffn } : address
}

/** Whether two addresses are the same once unmapped. */
export const same = (a: Address, b: Address): boolean => {
  const x = unmapped(a)
  const y = unmapped(b)
  return x.version === y.version && x.value === y.value
}

const loopbackV4 = parseRange("127.0.0.0/8")
const unspecifiedV4 = parseRange("0.0.0.0/8")

/**
 * Whether a connection to `address` stays on this machine: loopback (127.0.0.0/8, `::1`),
 * unspecified (0.0.0.0/8, `::`, which connect to this machine), or one of `interfaces`, the
 * machine's own addresses.
 */
export const isThisMachine = (address: Address, interfaces: ReadonlyArray<Address>): boolean => {
  const a = unmapped(address)
  if (a.version === 4 && [loopbackV4, unspecifiedV4].some((range) => range !== undefined && inRange(a, range))) return true
  if (a.version === 6 && (a.value === 0n || a.value === 1n)) return true
  return interfaces.some((own) => same(a, own))
}

/** A host and port, as `host:port` or `[v6]:port`. */
export interface Endpoint {
  /** A host name (lower case) or an address, without brackets. */
  readonly host: string
  readonly port: number
}

/** Parse `host:port` or `[v6]:port`; `undefined` if malformed. */
export const parseEndpoint = (text: string): Endpoint | undefined => {
  const match = /^(?:\[([^\]]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text.trim())
  if (match === null) return undefined
  const host = (match[1] ?? match[2] ?? "").toLowerCase()
  const port = Number(match[3])
  if (host === "" || port < 1 || port > 65_535 || (match[1] !== undefined && parse(host) === undefined)) return undefined
  return { host, port }
}

/** `host:port`, with an IPv6 address in brackets. */
export const formatEndpoint = (host: string, port: number): string => {
  const bare = host.replace(/^\[|\]$/g, "")
  return `${bare.includes(":") ? `[${bare}]` : bare}:${port}`
}
