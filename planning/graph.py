"""A server-rendered picture of the plan: steps layered by dependency depth, coloured by risk, with the
critical path (the longest dependency chain) marked, and data edges (which arguments read which output),
red where untrusted data flows into a MEDIUM or HIGH step. Computed once per page in Python, no queries."""

from dataclasses import dataclass, field

from planning.provenance import CONDITION, direct_sources, output_trusted, step_provenance, untrusted_arguments

NODE_WIDTH, NODE_HEIGHT = 168, 44
COLUMN_GAP, ROW_GAP, MARGIN = 56, 14, 12


@dataclass
class Node:
    key: str
    title: str
    risk: str
    status: str
    layer: int = 0
    row: int = 0
    x: int = 0
    y: int = 0
    critical: bool = False

    @property
    def label(self) -> str:
        return self.title if len(self.title) <= 22 else self.title[:21] + "…"


@dataclass
class Edge:
    source: Node
    target: Node
    critical: bool = False

    @property
    def path(self) -> str:
        x1, y1 = self.source.x + NODE_WIDTH, self.source.y + NODE_HEIGHT // 2
        x2, y2 = self.target.x, self.target.y + NODE_HEIGHT // 2
        middle = (x1 + x2) // 2
        return f"M{x1},{y1} C{middle},{y1} {middle},{y2} {x2},{y2}"


@dataclass
class DataEdge:
    """Data read by `target` from `source`'s output: drawn lower than the dependency edge, dashed."""

    source: Node
    target: Node
    arguments: list[str]
    untrusted: bool = False

    @property
    def path(self) -> str:
        x1, y1 = self.source.x + NODE_WIDTH, self.source.y + NODE_HEIGHT - 8
        x2, y2 = self.target.x, self.target.y + NODE_HEIGHT - 8
        middle = (x1 + x2) // 2
        return f"M{x1},{y1} C{middle},{y1 + 14} {middle},{y2 + 14} {x2},{y2}"

    @property
    def describe(self) -> str:
        names = ", ".join("its condition" if name == CONDITION else name for name in self.arguments)
        return f"{self.target.key} reads {self.source.key}'s output ({names})" + (
            " — untrusted data into a risky step" if self.untrusted else ""
        )


@dataclass
class Graph:
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    data_edges: list[DataEdge] = field(default_factory=list)
    width: int = 0
    height: int = 0
    critical_path: list[str] = field(default_factory=list)


def plan_graph(steps) -> Graph:
    nodes = {step.key: Node(step.key, step.title, step.risk, step.status) for step in steps}
    deps = {step.key: [d for d in step.depends_on if d in nodes] for step in steps}
    # Longest-path layering; steps were validated acyclic, but a guard keeps a bad row from looping.
    depth: dict[str, int] = {}
    best_parent: dict[str, str | None] = {}

    def layer_of(key: str, seen: frozenset = frozenset()) -> int:
        if key in depth:
            return depth[key]
        if key in seen:
            return 0
        parents = deps[key]
        if not parents:
            depth[key], best_parent[key] = 0, None
        else:
            parent = max(parents, key=lambda p: layer_of(p, seen | {key}))
            depth[key], best_parent[key] = layer_of(parent, seen | {key}) + 1, parent
        return depth[key]

    columns: dict[int, list[Node]] = {}
    for key, node in nodes.items():
        node.layer = layer_of(key)
        node.row = len(columns.setdefault(node.layer, []))
        columns[node.layer].append(node)
        node.x = MARGIN + node.layer * (NODE_WIDTH + COLUMN_GAP)
        node.y = MARGIN + node.row * (NODE_HEIGHT + ROW_GAP)
    graph = Graph(nodes=list(nodes.values()))
    if nodes:
        end = max(nodes, key=lambda k: depth[k])
        chain = []
        while end is not None:
            chain.append(end)
            end = best_parent.get(end)
        graph.critical_path = list(reversed(chain))
        for key in chain:
            nodes[key].critical = True
    critical_pairs = set(zip(graph.critical_path, graph.critical_path[1:], strict=False))
    graph.edges = [Edge(nodes[d], nodes[k], (d, k) in critical_pairs) for k in nodes for d in deps[k]]
    graph.data_edges = _data_edges(steps, nodes)
    graph.width = MARGIN * 2 + (max(columns, default=0) + 1) * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP
    graph.height = MARGIN * 2 + max((len(c) for c in columns.values()), default=1) * (NODE_HEIGHT + ROW_GAP) - ROW_GAP
    return graph


def _data_edges(steps, nodes: dict[str, Node]) -> list[DataEdge]:
    by_key = {step.key: step for step in steps}
    # A step's output is untrusted when its tool's is, or when untrusted data reached its inputs.
    tainted_output = {step.key: not output_trusted(step.tool) or bool(untrusted_arguments(step_provenance(step, by_key))) for step in steps}
    edges = []
    for step in steps:
        reads: dict[str, list[str]] = {}
        for argument, refs in direct_sources(step).items():
            for key, _ in refs:
                if key in nodes and argument not in reads.setdefault(key, []):
                    reads[key].append(argument)
        for key, arguments in reads.items():
            risky = nodes[step.key].risk in {"medium", "high"}
            edges.append(DataEdge(nodes[key], nodes[step.key], arguments, untrusted=risky and tainted_output[key]))
    return edges
