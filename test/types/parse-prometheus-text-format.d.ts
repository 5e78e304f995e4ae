// The package ships no types: its one function parses Prometheus text into metric families.
declare module "parse-prometheus-text-format" {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
