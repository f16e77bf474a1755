/**
 * A JSON document written one way whatever the order its members came in:
 * members sorted by name at every level (by UTF-16 code units, as RFC 8785
 * sorts them), no white space, numbers and strings as `JSON.stringify`
 * writes the parsed values (RFC 8785 writes numbers that way too). Two
 * documents that differ only in member order or spacing have one canonical
 * form, so a retry whose client serialized it anew is still the same payment
 * (docs/idempotency.md, the key and the fingerprint).
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  const members = value as Record<string, unknown>
  return `{${Object.keys(members)
    .sort()
    .map((name) => `${JSON.stringify(name)}:${canonicalJson(members[name])}`)
    .join(',')}}`
}
