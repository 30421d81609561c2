"""Nodes: paths and names (:mod:`.paths`), documents read, written and updated through the node's format
(:mod:`.base`: one interface, :mod:`.v3` and :mod:`.v2`, chosen once in :mod:`.formats`), creation with its
ancestor groups (:mod:`.create`), and the versions handles track (:mod:`.versions`). Every metadata write or
deletion refreshes the consolidated metadata its ancestors hold (as one update: :mod:`.records`)."""

from __future__ import annotations

from rectizarr.nodes.base import DocFormat as DocFormat
from rectizarr.nodes.create import create_new as create_new
from rectizarr.nodes.create import create_node as create_node
from rectizarr.nodes.create import create_parents as create_parents
from rectizarr.nodes.formats import delete_node as delete_node
from rectizarr.nodes.formats import doc_key as doc_key
from rectizarr.nodes.formats import format_for as format_for
from rectizarr.nodes.formats import format_of as format_of
from rectizarr.nodes.formats import node_doc as node_doc
from rectizarr.nodes.formats import node_exists as node_exists
from rectizarr.nodes.formats import node_from_json as node_from_json
from rectizarr.nodes.formats import read_children as read_children
from rectizarr.nodes.formats import read_meta as read_meta
from rectizarr.nodes.formats import try_read_meta as try_read_meta
from rectizarr.nodes.node import Node as Node
from rectizarr.nodes.paths import META as META
from rectizarr.nodes.paths import AncestorDocs as AncestorDocs
from rectizarr.nodes.paths import check_name as check_name
from rectizarr.nodes.paths import join as join
from rectizarr.nodes.paths import locked as locked
from rectizarr.nodes.paths import member_path_problem as member_path_problem
from rectizarr.nodes.paths import meta_key as meta_key
from rectizarr.nodes.paths import normalize_path as normalize_path
from rectizarr.nodes.paths import parent_paths as parent_paths
from rectizarr.nodes.paths import prefix_of as prefix_of
from rectizarr.nodes.paths import store_for as store_for
from rectizarr.nodes.v2 import V2 as V2
from rectizarr.nodes.versions import version_before_read as version_before_read
