"""The plan graph shows data edges (which step reads which output, through which arguments) and marks the
ones that carry untrusted data into a MEDIUM or HIGH step."""

from types import SimpleNamespace

from planning.graph import plan_graph


def step(key, tool, args=None, depends_on=(), condition="", risk="low"):
    return SimpleNamespace(
        key=key, title=key, tool=tool, args=args or {}, depends_on=list(depends_on), condition=condition, risk=risk, status="pending",
        resolved_args=None,
    )  # fmt: skip


def test_data_edges_name_the_arguments_and_mark_untrusted_data_into_risky_steps():
    graph = plan_graph(
        [
            step("page", "http_get", {"url": "https://example.org"}, risk="medium"),
            step("item", "get_item", {"item": "Aviator"}),
            step(
                "mail",
                "send_email",
                {"to": "{{ steps.page.output.text }}", "subject": "{{ steps.item.output.name }}", "body": "x"},
                depends_on=["page", "item"],
                risk="high",
            ),  # fmt: skip
            step("sum", "llm_generate", {"prompt": "{{ steps.page.output.text }}"}, depends_on=["page"]),
        ]
    )
    edges = {(e.source.key, e.target.key): e for e in graph.data_edges}
    assert set(edges) == {("page", "mail"), ("item", "mail"), ("page", "sum")}
    assert edges[("page", "mail")].arguments == ["to"] and edges[("page", "mail")].untrusted
    assert edges[("item", "mail")].arguments == ["subject"] and not edges[("item", "mail")].untrusted
    # Untrusted data into a LOW step is drawn, but not marked: nothing risky happens there.
    assert not edges[("page", "sum")].untrusted
    assert edges[("page", "mail")].describe == "mail reads page's output (to) — untrusted data into a risky step"


def test_a_dependency_without_a_template_has_no_data_edge():
    graph = plan_graph([step("a", "noop"), step("b", "noop", depends_on=["a"])])
    assert len(graph.edges) == 1 and graph.data_edges == []
