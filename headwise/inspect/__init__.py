"""Head analysis: statistics per layer and head, importance and pruning, rollout,
faithfulness, head roles, bad cases, and the offline report; token attribution of one
text (integrated gradients with its completeness error, :func:`explain`) and deletion
curves.

    analysis = inspect_classifier(clf, texts, labels)     # one JSON-serialisable dict
    write_report(analysis, "report/")                     # index.html, stats.json, figures/

``headwise inspect MODEL --data PATH --out DIR`` does both.
"""

from headwise.inspect.analysis import InspectOptions, example_views, inspect_classifier
from headwise.inspect.attribution import (
    Attribution,
    Explanation,
    LongTextNotExplained,
    explain,
    first_window,
    token_spans,
)
from headwise.inspect.badcases import bad_cases, link_slices
from headwise.inspect.categories import (
    CategoryLexicon,
    categories_from_spans,
    chinese_lexicon,
    default_lexicon,
    english_lexicon,
)
from headwise.inspect.faithfulness import (
    deletion_curves,
    faithfulness,
    method_scores,
    rank_methods,
    word_scores,
)
from headwise.inspect.forward import (
    NoAttentionError,
    attention_layers,
    iter_attention,
    label_ids,
    max_pool_mix,
)
from headwise.inspect.head_attribution import deciding_heads
from headwise.inspect.importance import ablation, gradient_importance, pruning_curve
from headwise.inspect.integrated_gradients import COMPLETENESS_TOLERANCE, integrated_gradients
from headwise.inspect.report import write_report
from headwise.inspect.report_html import build_html
from headwise.inspect.roles import RoleThresholds, head_roles, heads_with_role
from headwise.inspect.rollout import attention_rollout, head_rollout, rollout_matrix
from headwise.inspect.stats import HeadStatistics, row_statistics
from headwise.inspect.words import Segmented, segment, to_units, words_only

__all__ = [
    "COMPLETENESS_TOLERANCE",
    "Attribution",
    "CategoryLexicon",
    "Explanation",
    "LongTextNotExplained",
    "HeadStatistics",
    "InspectOptions",
    "RoleThresholds",
    "Segmented",
    "ablation",
    "NoAttentionError",
    "attention_layers",
    "attention_rollout",
    "bad_cases",
    "build_html",
    "categories_from_spans",
    "deciding_heads",
    "deletion_curves",
    "rank_methods",
    "chinese_lexicon",
    "default_lexicon",
    "english_lexicon",
    "example_views",
    "explain",
    "faithfulness",
    "first_window",
    "gradient_importance",
    "head_roles",
    "head_rollout",
    "max_pool_mix",
    "rollout_matrix",
    "heads_with_role",
    "inspect_classifier",
    "integrated_gradients",
    "iter_attention",
    "label_ids",
    "link_slices",
    "method_scores",
    "pruning_curve",
    "row_statistics",
    "segment",
    "to_units",
    "token_spans",
    "word_scores",
    "words_only",
    "write_report",
]
