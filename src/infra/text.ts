/** Lists in the WordPress style: "a, b, and c". */
export function humanList(values: readonly unknown[]): string {
  const s = values.map(String);
  if (s.length <= 1) return s.join('');
  if (s.length === 2) return `${s[0]} and ${s[1]}`;
  return `${s.slice(0, -1).join(', ')}, and ${s[s.length - 1]}`;
}
